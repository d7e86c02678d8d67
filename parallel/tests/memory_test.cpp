#include <gtest/gtest.h>

#include <vector>

#include "shardcheck/parallel/matrix.hpp"
#include "shardcheck/parallel/memory.hpp"

using namespace shardcheck;

TEST(peak_scope, counts_tracked_buffers_at_their_peak) {
  mem::peak_scope scope;
  {
    par::matrix<double> a(10, 10);
    par::matrix<double> b(5, 4);
  }
  par::matrix<float> c(3, 3);
  EXPECT_EQ(scope.peak(), 800u + 160u);
}

TEST(peak_scope, counts_global_new_in_test_binaries) {
  ASSERT_TRUE(mem::global_new_tracked());
  mem::peak_scope scope;
  { std::vector<char> v(12345); }
  EXPECT_EQ(scope.peak(), 12345u);
}

TEST(peak_scope, nested_scopes_keep_the_outer_peak) {
  mem::peak_scope outer;
  { std::vector<char> big(5000); }
  {
    mem::peak_scope inner;
    std::vector<char> small(100);
    EXPECT_EQ(inner.peak(), 100u);
  }
  EXPECT_EQ(outer.peak(), 5000u);
}
