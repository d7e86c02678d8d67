// The harness on a mesh of one rank: an absent claim is reported `not claimed`, never as a pass,
// and the same kernel with its claims is judged (and caught when it breaks them).
#include <gtest/gtest.h>

#include "mpi_environment.hpp"

#include <functional>
#include <memory>

#include "shardcheck/parallel/registry.hpp"
#include "shardcheck/properties/harness.hpp"

namespace shardcheck::prop {
namespace {

// A registered kernel whose claims pass through `edit` first (removed, or made wrong).
class edited_claims final : public par::kernel {
 public:
  edited_claims(const par::kernel& inner, std::function<void(par::claims&)> edit)
      : inner_(inner), edit_(std::move(edit)) {}
  [[nodiscard]] const par::kernel_info& info() const override { return inner_.info(); }
  [[nodiscard]] par::layout placement(par::tensor_slot t, const par::run_case& c) const override {
    return inner_.placement(t, c);
  }
  [[nodiscard]] par::claims cost(const par::run_case& c,
                                 std::span<const int> coords) const override {
    par::claims out = inner_.cost(c, coords);
    edit_(out);
    return out;
  }
  void forward(par::context& ctx, const par::run_case& c,
               const par::forward_io& io) const override {
    inner_.forward(ctx, c, io);
  }
  void backward(par::context& ctx, const par::run_case& c,
                const par::backward_io& io) const override {
    inner_.backward(ctx, c, io);
  }

 private:
  const par::kernel& inner_;
  std::function<void(par::claims&)> edit_;
};

// data_parallel without the claims not kept.
edited_claims without_claims(const par::kernel& inner, bool collectives, bool peak, bool chains) {
  return edited_claims(inner, [=](par::claims& c) {
    if (!collectives) c.collectives.reset();
    if (!peak) c.peak.reset();
    if (!chains) c.chains.reset();
  });
}

unsigned bit(property p) { return static_cast<unsigned>(p); }

verdict run(const par::kernel& k, const char* line) {
  par::run_case c = par::run_case::parse(line);
  par::complete_and_validate(k, c);
  par::comm self(par::comm_handle::self());
  return run_on_rank(subject{&k, {}}, c, self, all_properties);
}

const par::kernel& data_parallel() {
  static const par::registry r = par::builtin_strategies();
  return *r.find("data_parallel");
}

TEST(harness, every_claim_judged_when_all_are_made) {
  test::need_mpi();
  const verdict v = run(without_claims(data_parallel(), true, true, true),
                        "strategy=data_parallel p=1 M=5 N=3 K=4 mode=uniform seed=7");
  EXPECT_EQ(v.failed, 0u) << v.message;
  EXPECT_EQ(v.not_claimed, 0u);
}

TEST(harness, absent_claims_are_not_claimed_never_passed) {
  test::need_mpi();
  const verdict v = run(without_claims(data_parallel(), false, false, false),
                        "strategy=data_parallel p=1 M=5 N=3 K=4 mode=uniform seed=7");
  EXPECT_EQ(v.failed, 0u) << v.message;
  EXPECT_EQ(v.not_claimed, bit(property::ledger) | bit(property::memory) | bit(property::forward) |
                               bit(property::backward));
}

TEST(harness, without_chains_exact_mode_is_still_judged_bitwise) {
  test::need_mpi();
  const verdict v = run(without_claims(data_parallel(), true, true, false),
                        "strategy=data_parallel p=1 M=5 N=3 K=4 mode=exact seed=7");
  EXPECT_EQ(v.not_claimed, 0u);
  EXPECT_EQ(v.failed, 0u) << v.message;
}

// A kernel that claims a peak it exceeds is caught: the claim is judged, not just read.
TEST(harness, a_peak_above_its_claim_fails_memory) {
  test::need_mpi();
  const verdict v =
      run(edited_claims(data_parallel(), [](par::claims& c) { c.peak->forward -= 1; }),
          "strategy=data_parallel p=1 M=5 N=3 K=4 mode=uniform seed=7");
  EXPECT_EQ(v.failed, bit(property::memory)) << v.message;
}

// Chains for another number of layers than the case's (an outside kernel's slip) are a clear
// `runs` failure, not an out-of-range read when the bound is built.
TEST(harness, chains_for_the_wrong_number_of_layers_fail_runs) {
  test::need_mpi();
  for (const std::size_t n : {std::size_t{0}, std::size_t{2}}) {
    const verdict v =
        run(edited_claims(data_parallel(), [n](par::claims& c) { c.chains->resize(n); }),
            "strategy=data_parallel p=1 M=5 N=3 K=4 mode=uniform seed=7");
    EXPECT_NE(v.failed & bit(property::runs), 0u) << v.message;
    EXPECT_NE(v.message.find("chain_lengths for a case of L = 1 layers: one per layer"),
              std::string::npos)
        << v.message;
  }
}

}  // namespace
}  // namespace shardcheck::prop
