#pragma once
// The non-blocking collectives checked as a pseudo-strategy: every collective it issues is started
// (comm::start_*), moved on with test_pending() between chunks of the rank's own work and then
// waited, so the driver, generators, ledger, memory, determinism and replica properties hold the
// non-blocking forms to the reference on random p, shapes, dtypes and both backends.
//
// collective.overlap (parameter dw):
//   X: S(0)  W: R  Y: R    dY: S(0)  dX: S(0)  dW: S(0) over W's rows (dw=0) or R (dw=1)
//   forward: Y's rows in two windows [0, h) and [h, M), h = ⌊M/2⌋. This rank computes its rows of
//   window 0 and starts their all-gather(v) (counts |window ∩ part q|·N), computes its rows of
//   window 1 in chunks, testing between chunks, waits, then all-gathers window 1.
//   backward: the dW partial sums over the local rows are computed first and a reduce-scatter(v)
//   (dw=0, counts |part q of W's rows|·C) or an all-reduce (dw=1) started; dX = dY·W is computed
//   in row chunks meanwhile, testing between chunks; then the wait.
//   Example: p = 2, M = 5 (part.M 3,2): window 0 is rows 0–1, counts 2·N and 0; window 1 rows
//   2–4, counts 1·N and 2·N. Rank 1 computes nothing for window 0 and overlaps its gather with
//   rows 3–4.
#include "shardcheck/parallel/kernel.hpp"

namespace shardcheck::prop::checks {

class overlap_check final : public par::kernel {
 public:
  overlap_check();
  [[nodiscard]] const par::kernel_info& info() const override { return info_; }
  [[nodiscard]] par::layout placement(par::tensor_slot t, const par::run_case& c) const override;
  [[nodiscard]] par::claims cost(const par::run_case& c,
                                 std::span<const int> coords) const override;
  void forward(par::context& ctx, const par::run_case& c, const par::forward_io& io) const override;
  void backward(par::context& ctx, const par::run_case& c,
                const par::backward_io& io) const override;

 private:
  par::kernel_info info_;
};

}  // namespace shardcheck::prop::checks
