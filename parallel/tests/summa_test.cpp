#include <gtest/gtest.h>

#include "completed_case.hpp"
#include "strategies/summa.hpp"

using namespace shardcheck;
using namespace shardcheck::par;

TEST(summa, the_header_example) {
  const run_case c = completed("strategy=summa p=4 M=7 N=9 K=5 part.K=3,2 part.K@1=1,4 pr=2");
  const partition &ks = c.part("K"), &ks1 = c.part("K@1");
  EXPECT_EQ(summa_panel_end(ks, ks1, 0), 1);
  EXPECT_EQ(summa_panel_end(ks, ks1, 1), 3);
  EXPECT_EQ(summa_panel_end(ks, ks1, 3), 5);
  // Rank (1, 0): X panels come from mesh column 0, 1, 1; W panels from mesh row 0, 0, 1.
  const claims e = builtin("summa").cost(c, std::vector<int>{1, 0});
  ASSERT_TRUE(e.collectives.has_value());
  const std::vector<ledger_entry>& forward = e.collectives->forward;
  ASSERT_EQ(forward.size(), 6u);
  const int roots[] = {0, 0, 1, 0, 1, 1};
  const int axes[] = {1, 0, 1, 0, 1, 0};
  for (std::size_t t = 0; t < 6; ++t) {
    EXPECT_EQ(forward[t].root, roots[t]) << t;
    EXPECT_EQ(forward[t].axis, axes[t]) << t;
  }
  ASSERT_TRUE(e.chains.has_value());
  ASSERT_EQ(e.chains->size(), 1u);
  EXPECT_EQ(e.chains->front().y, 5);
}

TEST(summa, leaves_no_empty_panel_for_empty_parts) {
  const run_case c = completed("strategy=summa p=6 M=3 N=2 K=4 part.K=0,4 part.K@1=2,0,2 pr=2");
  std::vector<std::int64_t> ends;
  for (std::int64_t lo = 0; lo < 4; lo = ends.back())
    ends.push_back(summa_panel_end(c.part("K"), c.part("K@1"), lo));
  EXPECT_EQ(ends, (std::vector<std::int64_t>{2, 4}));
}

TEST(summa, needs_mesh_rows_that_divide_p) {
  EXPECT_THROW(completed("strategy=summa p=4 M=1 N=1 K=1 pr=3"), invalid_problem);
  EXPECT_THROW(completed("strategy=summa p=4 M=1 N=1 K=1 pr=0"), invalid_problem);
  EXPECT_NO_THROW(completed("strategy=summa p=4 M=1 N=1 K=1 pr=4"));
}
