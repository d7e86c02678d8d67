#pragma once
// Data parallel. X is sharded by rows (partition part.M), W replicated, each rank multiplies its
// rows; Y is all-gathered in rank order (gather=1, Y = R) or left sharded (gather=0, Y = S(0)).
// Backward: dX = dY_r·W is local (S(0)); the dW partial sums dY_rᵀ·X_r are all-reduced (R).
//
//   X: S(0)  W: R  Y: R | S(0)      dY: S(0)  dX: S(0)  dW: R
//   forward:  gather=1: one all-gather of Y (counts rows_r·N)     gather=0: nothing
//   backward: one all-reduce of dW (N·K elements)
//
// Example: p = 3, M = 7, part.M = 3,2,2: rank 0 holds rows 0–2, rank 1 rows 3–4, rank 2 rows 5–6;
// the all-gather counts are 3N, 2N, 2N. part.M = 3,0,4 leaves rank 1 without rows: it still takes
// part in both collectives, with a zero count and a zero dW partial.
#include "shardcheck/parallel/kernel.hpp"

namespace shardcheck::par {

class data_parallel final : public kernel {
 public:
  data_parallel();
  [[nodiscard]] const kernel_info& info() const override { return info_; }
  [[nodiscard]] layout placement(tensor_slot t, const run_case& c) const override;
  [[nodiscard]] claims cost(const run_case& c, std::span<const int> coords) const override;
  void forward(context& ctx, const run_case& c, const forward_io& io) const override;
  void backward(context& ctx, const run_case& c, const backward_io& io) const override;

 private:
  kernel_info info_;
};

}  // namespace shardcheck::par
