#pragma once
// Column → row pair (Megatron's MLP): Y = f(X·W_1ᵀ)·W_2ᵀ, f = identity or ReLU (act=). W_1 is split
// on its outputs and W_2 on its inputs by the same partition part.H (layer_pair.hpp), so rank r
// computes A_r = f(X·W_1,rᵀ) (M×h_r, its hidden units, no communication) and the partial
// A_r·W_2,rᵀ (M×N); the partials are all-reduced: exactly one collective in forward.
// Backward mirrors it: from the replicated dY, rank r recomputes H_r, forms dA_r = dY·W_2,r,
// dH_r = dA_r ⊙ f'(H_r), its shards dW_2,r = dYᵀ·A_r and dW_1,r = dH_rᵀ·X, and the partial
// dX_r = dH_r·W_1,r; the partials of dX are all-reduced: exactly one collective in backward.
//
//   out_in: X R  W1 S(0)  W2 S(1)  Y R  dY R  dX R  dW1 S(0)  dW2 S(1)
//   in_out: X R  W1 S(1)  W2 S(0)  Y R  dY R  dX R  dW1 S(1)  dW2 S(0)
//   forward:  one all-reduce of Y (M·N)      backward: one all-reduce of dX (M·K)
//
// Example: p = 3, H = 7, part.H = 3,0,4: rank 1 holds no hidden unit, contributes zeros to both
// all-reduces and its dW_1, dW_2 are empty.
#include "strategies/layer_pair.hpp"

namespace shardcheck::par {

class column_row_pair final : public layer_pair {
 public:
  column_row_pair();
  [[nodiscard]] claims cost(const run_case& c, std::span<const int> coords) const override;
  void forward(context& ctx, const run_case& c, const forward_io& io) const override;
  void backward(context& ctx, const run_case& c, const backward_io& io) const override;
};

}  // namespace shardcheck::par
