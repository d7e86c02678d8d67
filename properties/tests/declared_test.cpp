// What a kernel declares beyond its placements, as the generators, the final shrinking pass and
// the harness honour it: cases it declines are never drawn nor shrunk to, and are counted; the
// partitions its library picks are the case's; a kernel not deterministic by design has its
// determinism reported `not claimed`.
#include <gtest/gtest.h>

#include "mpi_environment.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "completed_case.hpp"
#include "shardcheck/properties/generators.hpp"
#include "shardcheck/properties/harness.hpp"
#include "shardcheck/properties/shrink.hpp"

namespace shardcheck::prop {
namespace {

using par::run_case;

// ⌈n/p⌉ indices per part, the last parts short or empty (Global Arrays' default blocks).
par::partition blocks_of(std::int64_t n, int p) {
  const std::int64_t b = (n + p - 1) / p;
  std::vector<std::int64_t> sizes;
  for (int r = 0; r < p; ++r) sizes.push_back(std::clamp<std::int64_t>(n - r * b, 0, b));
  return par::partition(std::move(sizes));
}

bool square(int p) {
  int q = 1;
  while (q * q < p) ++q;
  return q * q == p;
}

// data_parallel with declarations: `takes`, an odd K declined (when pairs), ⌈M/p⌉ blocks (when
// blocks), not deterministic (when varies, every second run of a uniform case adds one ulp to
// dW's first element).
class declaring final : public par::kernel {
 public:
  struct options {
    par::preconditions takes{};
    bool pairs = false, blocks = false, varies = false, deterministic = true;
  };
  explicit declaring(options o) : inner_(par::builtin("data_parallel")), o_(std::move(o)) {
    info_ = inner_.info();
    info_.name = "declaring";
    info_.takes = o_.takes;
    info_.deterministic = o_.deterministic;
  }
  [[nodiscard]] const par::kernel_info& info() const override { return info_; }
  [[nodiscard]] std::optional<std::string> declines(const run_case& c) const override {
    if (o_.pairs && c.prob.K % 2 != 0) return "K odd";
    return std::nullopt;
  }
  [[nodiscard]] std::map<std::string, par::partition> library_partitions(
      const run_case& c) const override {
    if (!o_.blocks) return {};
    return {{"M", blocks_of(c.prob.M, c.p)}};
  }
  [[nodiscard]] par::layout placement(par::tensor_slot t, const run_case& c) const override {
    return inner_.placement(t, c);
  }
  [[nodiscard]] par::claims cost(const run_case& c, std::span<const int> coords) const override {
    return inner_.cost(c, coords);
  }
  void forward(par::context& ctx, const run_case& c, const par::forward_io& io) const override {
    inner_.forward(ctx, c, io);
  }
  void backward(par::context& ctx, const run_case& c, const par::backward_io& io) const override {
    inner_.backward(ctx, c, io);
    if (!o_.varies || c.mode != value_mode::uniform || ++runs_ % 2 != 0) return;
    std::visit(
        [](auto& m) {
          using T = typename std::decay_t<decltype(m.data)>::value_type;
          if constexpr (std::is_floating_point_v<T>)
            if (!m.data.empty() && m.data[0] != T(0))
              m.data[0] = std::nextafter(m.data[0], std::numeric_limits<T>::infinity());
        },
        io.dws[0]);
  }

 private:
  const par::kernel& inner_;
  options o_;
  par::kernel_info info_;
  mutable int runs_ = 0;
};

std::vector<run_case> draw(const par::kernel& k, int max_p, int n, draw_tally* tally) {
  std::vector<run_case> out;
  const auto gen = case_for(k, max_p, {}, tally);
  for (int i = 0; i < n; ++i) out.push_back(gen(rc::Random(7919u * (i + 1)), 100).value());
  return out;
}

bool takes(const par::kernel& k, run_case c) {
  try {
    par::complete_and_validate(k, c);
    return true;
  } catch (const par::case_declined&) {
    return false;
  }
}

TEST(case_for, draws_only_cases_the_kernel_takes_and_counts_the_others) {
  const declaring k({.takes = {.min_size = {{"M", 1}}, .square_p = true}, .pairs = true});
  draw_tally tally;
  int p4 = 0;
  for (const run_case& c : draw(k, 4, 300, &tally)) {
    EXPECT_TRUE(square(c.p)) << c.to_string();
    EXPECT_GE(c.prob.M, 1) << c.to_string();
    EXPECT_EQ(c.prob.K % 2, 0) << c.to_string();
    p4 += c.p == 4 ? 1 : 0;
  }
  EXPECT_GT(p4, 0);
  EXPECT_GE(tally.accepted, 300);
  EXPECT_GT(tally.declined, 100);  // p = 2, 3 are half the worker counts; K odd half the rest
  EXPECT_FALSE(tally.example.empty());
}

TEST(case_for, says_so_when_the_kernel_declines_everything) {
  const declaring k({.takes = {.min_p = 5}});
  draw_tally tally;
  const auto gen = case_for(k, 4, {}, &tally);
  try {
    (void)gen(rc::Random(1), 100).value();
    FAIL() << "drew a case";
  } catch (const rc::GenerationFailure& e) {
    EXPECT_NE(std::string(e.what()).find("declaring declined 100 cases drawn in a row (the last: "
                                         "p="),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(tally.declined, max_declined_in_a_row);
  for (int i = 0; i < 20; ++i) try {
      (void)gen(rc::Random(i + 2), 100).value();
    } catch (const rc::GenerationFailure&) {
    }
  // Once it has declined max_declined_in_all and taken none, it gives up at once.
  EXPECT_EQ(tally.declined, max_declined_in_all);
  try {
    (void)gen(rc::Random(99), 100).value();
  } catch (const rc::GenerationFailure& e) {
    EXPECT_NE(std::string(e.what()).find("declaring declined all 1000 cases drawn"),
              std::string::npos)
        << e.what();
  }
}

TEST(case_for, a_kernel_that_declares_nothing_draws_what_its_inner_kernel_draws) {
  const declaring k({});
  const par::kernel& dp = par::builtin("data_parallel");
  draw_tally tally;
  const auto gen = case_for(dp, 4);
  const std::vector<run_case> mine = draw(k, 4, 100, &tally);
  EXPECT_EQ(tally.declined, 0);
  // The same seeds through data_parallel draw the same cases.
  for (int i = 0; i < 100; ++i) {
    run_case c = gen(rc::Random(7919u * (i + 1)), 100).value();
    c.strategy = "declaring";
    EXPECT_EQ(c.to_string(), mine[static_cast<std::size_t>(i)].to_string());
  }
}

TEST(case_for, the_library_picks_its_partitions) {
  const declaring k({.blocks = true});
  for (const run_case& c : draw(k, 4, 200, nullptr))
    EXPECT_EQ(c.part("M"), blocks_of(c.prob.M, c.p)) << c.to_string();
}

TEST(simpler, stays_inside_the_cases_the_kernel_takes) {
  const declaring k({.takes = {.min_size = {{"M", 1}}, .square_p = true}, .pairs = true});
  run_case c = run_case::parse(
      "strategy=declaring p=4 M=9 N=5 K=6 dtype=f64 mode=uniform seed=5 backend=native "
      "part.M=1,2,3,3");
  par::complete_and_validate(k, c);
  const std::vector<run_case> next = simpler(c, k, {});
  ASSERT_FALSE(next.empty());
  bool p1 = false;
  for (const run_case& d : next) {
    EXPECT_TRUE(takes(k, d)) << d.to_string();
    EXPECT_TRUE(d.p == 1 || d.p == 4) << d.to_string();
    p1 = p1 || d.p == 1;
  }
  EXPECT_TRUE(p1);  // 1 is a square; p/2 = 2 and p − 1 = 3 are not
}

TEST(simpler, keeps_the_librarys_partitions) {
  const declaring k({.blocks = true});
  run_case c = run_case::parse("strategy=declaring p=4 M=10 N=3 K=2 dtype=f64 mode=uniform");
  par::complete_and_validate(k, c);
  ASSERT_EQ(c.part("M").to_string(), "3,3,3,1");
  std::set<std::int64_t> ms;
  for (const run_case& d : simpler(c, k, {})) {
    EXPECT_EQ(d.part("M"), blocks_of(d.prob.M, d.p)) << d.to_string();
    ms.insert(d.prob.M);
  }
  // Every smaller M is tried (each with the library's blocks, none refitted from 3,3,3,1).
  for (const std::int64_t m : {0, 1, 5, 9}) EXPECT_TRUE(ms.contains(m)) << m;
}

verdict run(const par::kernel& k, const char* line) {
  run_case c = run_case::parse(line);
  par::complete_and_validate(k, c);
  par::comm self(par::comm_handle::self());
  return run_on_rank(subject{&k, {}}, c, self, all_properties);
}

unsigned bit(property p) { return static_cast<unsigned>(p); }

TEST(harness, a_kernel_that_varies_between_runs_fails_determinism) {
  test::need_mpi();
  const declaring k({.varies = true});
  const verdict v = run(k, "strategy=declaring p=1 M=5 N=3 K=4 mode=uniform seed=7");
  EXPECT_EQ(v.failed, bit(property::determinism)) << v.message;
}

TEST(harness, not_deterministic_by_design_reads_not_claimed_never_passed) {
  test::need_mpi();
  const declaring k({.varies = true, .deterministic = false});
  const verdict v = run(k, "strategy=declaring p=1 M=5 N=3 K=4 mode=uniform seed=7");
  EXPECT_EQ(v.failed, 0u) << v.message;
  EXPECT_EQ(v.not_claimed, bit(property::determinism));
}

}  // namespace
}  // namespace shardcheck::prop
