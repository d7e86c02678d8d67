#pragma once
// Row parallel (Megatron's RowParallelLinear). W is split on the input features K (partition
// part.K) and X on its columns the same way; each rank computes a partial Y_r = X_r·W_rᵀ over its
// K-share, a full M×N matrix whose sum over ranks is Y. The partials are all-reduced (scatter=0,
// Y = R) or reduce-scattered by rows over part.M (scatter=1, Y = S(0)).
// Backward: dY arrives as Y left (R, or S(0) which is all-gathered first); dX_r = dY·W_r is local
// (S(1)), and so is dW_r = dYᵀ·X_r (sharded like W).
//
//   out_in: X: S(1)  W: S(1)  Y: R | S(0)      dY: R | S(0)  dX: S(1)  dW: S(1)
//   in_out: X: S(1)  W: S(0)  Y: R | S(0)      dY: R | S(0)  dX: S(1)  dW: S(0)
//   forward:  scatter=0: one all-reduce of Y (M·N)   scatter=1: one reduce-scatter (counts m_r·N)
//   backward: scatter=0: nothing                     scatter=1: one all-gather of dY (m_r·N)
//
// Example: p = 3, K = 7, part.K = 3,2,2: rank 0 contracts over k = 0–2, rank 1 over 3–4, rank 2
// over 5–6, and every element of Y is the sum of the three ranks' partials.
#include "shardcheck/parallel/kernel.hpp"

namespace shardcheck::par {

class row_parallel final : public kernel {
 public:
  row_parallel();
  [[nodiscard]] const kernel_info& info() const override { return info_; }
  [[nodiscard]] layout placement(tensor_slot t, const run_case& c) const override;
  [[nodiscard]] claims cost(const run_case& c, std::span<const int> coords) const override;
  void forward(context& ctx, const run_case& c, const forward_io& io) const override;
  void backward(context& ctx, const run_case& c, const backward_io& io) const override;

 private:
  kernel_info info_;
};

}  // namespace shardcheck::par
