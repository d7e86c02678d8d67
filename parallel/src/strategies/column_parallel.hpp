#pragma once
// Column parallel (Megatron's ColumnParallelLinear). W is split on the output features N
// (partition part.N), X replicated; each rank computes Y_r = X·W_rᵀ, the M×n_r column block of Y,
// which is left sharded (gather=0, Y = S(1)) or all-gathered (gather=1, Y = R). Y is row-major
// M×N, so a column block is not contiguous: the all-gather runs on a packed buffer (rank blocks
// one after another, counts M·n_r) which is then re-laid into M×N.
// Backward: dY is S(1); dX = Σ_r dY_r·W_r is a sum over ranks, all-reduced (R); dW_r = dY_rᵀ·X is
// local, sharded like W.
//
//   out_in: X: R  W: S(0)  Y: R | S(1)      dY: S(1)  dX: R  dW: S(0)
//   in_out: X: R  W: S(1)  Y: R | S(1)      dY: S(1)  dX: R  dW: S(1)
//   forward:  gather=1: one all-gather of the packed Y (counts M·n_r)     gather=0: nothing
//   backward: one all-reduce of dX (M·K elements)
//
// Example: p = 3, N = 5, part.N = 2,0,3: rank 0 computes columns 0–1, rank 1 nothing, rank 2
// columns 2–4; the all-gather counts are 2M, 0, 3M.
#include "shardcheck/parallel/kernel.hpp"

namespace shardcheck::par {

class column_parallel final : public kernel {
 public:
  column_parallel();
  [[nodiscard]] const kernel_info& info() const override { return info_; }
  [[nodiscard]] layout placement(tensor_slot t, const run_case& c) const override;
  [[nodiscard]] claims cost(const run_case& c, std::span<const int> coords) const override;
  void forward(context& ctx, const run_case& c, const forward_io& io) const override;
  void backward(context& ctx, const run_case& c, const backward_io& io) const override;

 private:
  kernel_info info_;
};

}  // namespace shardcheck::par
