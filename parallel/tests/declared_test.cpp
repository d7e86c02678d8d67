// What a kernel declares beyond its placements (kernel.hpp): the cases it takes (info().takes and
// declines()) and the partitions its library picks (library_partitions()), as
// complete_and_validate applies them.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "shardcheck/parallel/kernel.hpp"

using namespace shardcheck;
using namespace shardcheck::par;

namespace {
// X, Y, dY, dX sharded by rows on one axis, W and dW replicated; runs nothing.
class rows final : public kernel {
 public:
  using rule = std::function<std::optional<std::string>(const run_case&)>;
  using picks = std::function<std::map<std::string, partition>(const run_case&)>;
  explicit rows(preconditions takes, rule declines = {}, picks library = {})
      : declines_(std::move(declines)), library_(std::move(library)) {
    info_.name = "rows";
    info_.summary = "test";
    info_.takes = std::move(takes);
  }
  [[nodiscard]] const kernel_info& info() const override { return info_; }
  [[nodiscard]] layout placement(tensor_slot t, const run_case&) const override {
    return {t.t == tensor::w || t.t == tensor::dw ? placement::R() : placement::S(0)};
  }
  [[nodiscard]] std::optional<std::string> declines(const run_case& c) const override {
    return declines_ ? declines_(c) : std::nullopt;
  }
  [[nodiscard]] std::map<std::string, partition> library_partitions(
      const run_case& c) const override {
    return library_ ? library_(c) : std::map<std::string, partition>{};
  }
  void forward(context&, const run_case&, const forward_io&) const override {}
  void backward(context&, const run_case&, const backward_io&) const override {}

 private:
  kernel_info info_;
  rule declines_;
  picks library_;
};

// The reason k declines `line`'s case; "" when it takes it. Any other refusal escapes.
std::string declined(const kernel& k, const std::string& line) {
  run_case c = run_case::parse("strategy=rows " + line);
  try {
    complete_and_validate(k, c);
  } catch (const case_declined& e) {
    EXPECT_EQ(std::string(e.what()), "rows declines the case: " + e.reason());
    return e.reason();
  }
  return "";
}
}  // namespace

TEST(preconditions, none_by_default_takes_everything_it_did_before) {
  const rows k({});
  EXPECT_EQ(declined(k, "p=3 M=0 N=0 K=0 part.M=0,0,0"), "");
  EXPECT_EQ(to_string(preconditions{}), "");
}

TEST(preconditions, the_worker_count) {
  const rows square({.square_p = true});
  EXPECT_EQ(declined(square, "p=1 M=4 N=2 K=2"), "");
  EXPECT_EQ(declined(square, "p=4 M=4 N=2 K=2"), "");
  EXPECT_EQ(declined(square, "p=3 M=4 N=2 K=2"), "p=3 is not a perfect square");
  EXPECT_EQ(declined(square, "p=8 M=4 N=2 K=2"), "p=8 is not a perfect square");
  const rows twos({.power_of_two_p = true});
  EXPECT_EQ(declined(twos, "p=8 M=4 N=2 K=2"), "");
  EXPECT_EQ(declined(twos, "p=6 M=4 N=2 K=2"), "p=6 is not a power of two");
  const rows two({.min_p = 2});
  EXPECT_EQ(declined(two, "p=1 M=4 N=2 K=2"), "p=1 is below its minimum 2");
  EXPECT_EQ(declined(two, "p=2 M=4 N=2 K=2"), "");
}

TEST(preconditions, the_dimensions) {
  const rows k({.min_dim = 1, .min_size = {{"M", 3}}, .multiple_of = {{"K", 2}}});
  EXPECT_EQ(declined(k, "p=1 M=3 N=1 K=4"), "");
  EXPECT_EQ(declined(k, "p=1 M=3 N=0 K=4"), "N=0 is below its minimum 1");
  EXPECT_EQ(declined(k, "p=1 M=2 N=1 K=4"), "M=2 is below its minimum 3");
  EXPECT_EQ(declined(k, "p=1 M=3 N=1 K=5"), "K=5 is not a multiple of 2");
  EXPECT_EQ(declined(k, "p=1 M=3 N=1 K=0"), "K=0 is below its minimum 1");
  EXPECT_EQ(to_string(k.info().takes), "every dimension ≥ 1; M ≥ 3; K a multiple of 2");
}

TEST(preconditions, a_name_that_is_no_dimension_is_the_kernels_mistake) {
  const rows k({.min_size = {{"Q", 1}}});
  run_case c = run_case::parse("strategy=rows p=1 M=1 N=1 K=1");
  try {
    complete_and_validate(k, c);
    FAIL() << "validated";
  } catch (const case_declined& e) {
    FAIL() << "declined: " << e.what();
  } catch (const invalid_problem& e) {
    EXPECT_NE(std::string(e.what()).find("names 'Q', which is no dimension"), std::string::npos)
        << e.what();
  }
  // A stack's widths are dimensions; a single layer has none, and is taken.
  const rows h({.min_size = {{"H2", 1}}});
  EXPECT_EQ(declined(h, "p=1 M=1 N=1 K=1"), "");
}

TEST(preconditions, empty_parts_given_or_balanced) {
  const rows k({.no_empty_parts = true});
  EXPECT_EQ(declined(k, "p=2 M=3 N=1 K=1 part.M=3,0"), "part.M=3,0 has an empty part");
  EXPECT_EQ(declined(k, "p=2 M=1 N=1 K=1"), "part.M=1,0 has an empty part");
  EXPECT_EQ(declined(k, "p=2 M=3 N=1 K=1 part.M=1,2"), "");
}

TEST(preconditions, the_kernels_own_rule_sees_the_complete_case) {
  const rows k({}, [](const run_case& c) -> std::optional<std::string> {
    if (c.part("M").size(0) > 2) return "more than 2 rows on rank 0";
    return std::nullopt;
  });
  EXPECT_EQ(declined(k, "p=2 M=6 N=1 K=1 part.M=2,4"), "");
  EXPECT_EQ(declined(k, "p=2 M=6 N=1 K=1"), "more than 2 rows on rank 0");
}

// A case that cannot run at all (bf16 without a declared policy, an unknown parameter) is invalid,
// not declined.
TEST(preconditions, invalid_before_declined) {
  const rows k({.square_p = true});
  run_case c = run_case::parse("strategy=rows p=3 M=4 N=2 K=2 dtype=bf16");
  try {
    complete_and_validate(k, c);
    FAIL() << "validated";
  } catch (const case_declined& e) {
    FAIL() << "declined: " << e.what();
  } catch (const invalid_problem&) {
  }
  run_case d = run_case::parse("strategy=rows p=3 M=4 N=2 K=2 gather=1");
  EXPECT_THROW(complete_and_validate(k, d), invalid_problem);
  try {
    complete_and_validate(k, d);
  } catch (const case_declined& e) {
    FAIL() << "declined: " << e.what();
  } catch (const invalid_problem&) {
  }
}

TEST(library_partitions, fill_the_case_and_refuse_a_contradiction) {
  // ⌈M/p⌉ rows per rank, as Global Arrays deals them: M = 5 on 4 ranks is 2,2,1,0.
  const rows k({}, {}, [](const run_case& c) {
    const std::int64_t b = (c.prob.M + c.p - 1) / c.p;
    std::vector<std::int64_t> sizes;
    for (int r = 0; r < c.p; ++r) sizes.push_back(std::clamp<std::int64_t>(c.prob.M - r * b, 0, b));
    return std::map<std::string, partition>{{"M", partition(sizes)}};
  });
  run_case c = run_case::parse("strategy=rows p=4 M=5 N=1 K=1");
  complete_and_validate(k, c);
  EXPECT_EQ(c.part("M").to_string(), "2,2,1,0");
  EXPECT_NE(c.to_string().find(" part.M=2,2,1,0"), std::string::npos) << c.to_string();
  run_case same = run_case::parse("strategy=rows p=4 M=5 N=1 K=1 part.M=2,2,1,0");
  EXPECT_NO_THROW(complete_and_validate(k, same));
  run_case other = run_case::parse("strategy=rows p=4 M=5 N=1 K=1 part.M=2,1,1,1");
  try {
    complete_and_validate(k, other);
    FAIL() << "validated";
  } catch (const case_declined& e) {
    FAIL() << "declined: " << e.what();
  } catch (const invalid_problem& e) {
    EXPECT_NE(std::string(e.what()).find("part.M=2,1,1,1 contradicts the partition the kernel's "
                                         "library picks, part.M=2,2,1,0"),
              std::string::npos)
        << e.what();
  }
}

TEST(library_partitions, are_checked_like_any_partition) {
  const rows k({}, {}, [](const run_case& c) {
    return std::map<std::string, partition>{{"M", partition::balanced(c.prob.M + 1, c.p)}};
  });
  run_case c = run_case::parse("strategy=rows p=2 M=4 N=1 K=1");
  EXPECT_THROW(complete_and_validate(k, c), invalid_problem);
  const rows unused({}, {}, [](const run_case& c) {
    return std::map<std::string, partition>{{"N", partition::balanced(c.prob.N, c.p)}};
  });
  run_case d = run_case::parse("strategy=rows p=2 M=4 N=1 K=1");
  EXPECT_THROW(complete_and_validate(unused, d), invalid_problem);
}
