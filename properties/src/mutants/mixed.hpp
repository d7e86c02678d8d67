#pragma once
// Mixed-precision mutants: row_parallel run in bf16 / f16 with a defect in how its sums are
// formed, while it declares (and is judged by) acc=f32 reduce=f32. Their cases are drawn in bf16
// and f16 with that policy only, with scatter=0 (Y all-reduced).
//
//   partials_in_storage  each rank's f32 partial is rounded to the storage dtype before the
//                        all-reduce (the sum then adds those rounded values): the bug class of
//                        reducing gradients in bf16. On 2 ranks, K = 64: partials 3.0000002 and
//                        -2.9921875 become 3 and -2.9921875 in bf16.
//   acc_in_storage       the local contraction summed in the storage dtype, each addition rounded
//                        (1 + 2⁻⁹ + 2⁻⁹ + … stays 1 in bf16): at K/p = 8192 the partial loses
//                        most of its bits.
// The ledger stays as claimed (the reduction still travels in f32): only forward can catch them.
//
// partials_in_storage on the other reducing hosts (column_row_pair, sequence_parallel_pair,
// sharded_weights) is storage_path: the host's own reduce=<storage> path run — its partials
// rounded to the storage dtype and added in it — while the case declares, and is judged by,
// reduce=f32. Its cost model states that path (2-byte partials, its peaks), so the ledger and
// memory agree with what it does: only forward and backward can catch it. On 2 ranks,
// column_row_pair in bf16: Y's partials 3.0000002 and -2.9921875 travel as 3 and -2.9921875.
#include <memory>
#include <span>
#include <string>

#include "mutants/kernels.hpp"

namespace shardcheck::prop::mutants {

class partials_in_storage final : public kernel_decorator {
 public:
  partials_in_storage(const par::kernel& inner, std::string name, std::shared_ptr<fire_log> log);
  void forward(par::context& ctx, const par::run_case& c, const par::forward_io& io) const override;
};

class storage_path final : public kernel_decorator {
 public:
  storage_path(const par::kernel& inner, std::string name, std::shared_ptr<fire_log> log);
  [[nodiscard]] par::claims cost(const par::run_case& c,
                                 std::span<const int> coords) const override;
  void forward(par::context& ctx, const par::run_case& c, const par::forward_io& io) const override;
  void backward(par::context& ctx, const par::run_case& c,
                const par::backward_io& io) const override;

 private:
  // The case as run, made by cost() (called before the measured phases, so that the copy's
  // allocations stay out of the memory meter); forward and backward make it again only for a
  // case cost() did not see.
  [[nodiscard]] const par::run_case& as_run(const par::run_case& c) const;
  mutable par::run_case last_{}, shadow_{};
};

class acc_in_storage final : public kernel_decorator {
 public:
  acc_in_storage(const par::kernel& inner, std::string name, std::shared_ptr<fire_log> log);
  void forward(par::context& ctx, const par::run_case& c, const par::forward_io& io) const override;
};

}  // namespace shardcheck::prop::mutants
