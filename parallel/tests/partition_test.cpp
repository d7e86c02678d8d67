#include <gtest/gtest.h>

#include "shardcheck/parallel/partition.hpp"
#include "shardcheck/parallel/placement.hpp"
#include "shardcheck/reference/types.hpp"

using namespace shardcheck;
using namespace shardcheck::par;

TEST(partition, balanced_puts_the_remainder_first) {
  const auto p = partition::balanced(7, 3);
  EXPECT_EQ(p.sizes(), (std::vector<std::int64_t>{3, 2, 2}));
  EXPECT_EQ(p.offset(2), 5);
  EXPECT_EQ(p.length(), 7);
}

TEST(partition, empty_parts_are_legal_and_own_nothing) {
  const auto p = partition::parse("0,3,0,4");
  EXPECT_EQ(p.owner(0), 1);
  EXPECT_EQ(p.owner(2), 1);
  EXPECT_EQ(p.owner(3), 3);
  EXPECT_EQ(p.owner(6), 3);
  EXPECT_EQ(p.max_size(), 4);
  EXPECT_EQ(p.to_string(), "0,3,0,4");
  EXPECT_EQ(partition::balanced(2, 4).sizes(), (std::vector<std::int64_t>{1, 1, 0, 0}));
}

TEST(partition, rejects_bad_input) {
  EXPECT_THROW((void)partition::parse("3,-1"), invalid_problem);
  EXPECT_THROW((void)partition::parse("3,,1"), invalid_problem);
  EXPECT_THROW((void)partition::parse("x"), invalid_problem);
  EXPECT_THROW((void)partition::balanced(-1, 2), invalid_problem);
  EXPECT_THROW((void)partition::balanced(4, 0), invalid_problem);
  EXPECT_THROW((void)partition::parse("2,2").owner(4), invalid_problem);
}

TEST(placement, prints_and_parses) {
  const layout l = parse_layout("S(0),R,P,S(1)");
  EXPECT_EQ(to_string(l), "S(0),R,P,S(1)");
  EXPECT_EQ(l[0], placement::S(0));
  EXPECT_THROW((void)parse_layout("S(2)"), invalid_problem);
  EXPECT_THROW((void)parse_layout(""), invalid_problem);
}

TEST(placement, on_prints_and_parses) {
  EXPECT_EQ(placement::On(3).to_string(), "On(3)");
  EXPECT_EQ(placement::parse("On(12)"), placement::On(12));
  EXPECT_EQ(to_string(parse_layout("S(0),On(1),R")), "S(0),On(1),R");
  for (const char* bad : {"On()", "On(-1)", "On(1", "On(x)", "On(1)x"})
    EXPECT_THROW((void)placement::parse(bad), invalid_problem) << bad;
}
