#pragma once
// Redistribution as a kernel: the linear layer is computed in a source layout of Y (`src`) and
// redistributed to the output layout (`dst`) by par::redistribute, so that every pair the module
// supports runs through the same driver, reference, ledger and memory checks as any kernel.
// The source layout decides how the product is split:
//
//   src    X     W       local Y        backward: dY needed   dX          dW
//   0 R    R     R       M×N            R                     R           R
//   1 S(0) S(0)  R       m_r×N          S(0)                  S(0)        P → R (all-reduce)
//   2 S(1) R     S(N)    M×n_r          S(1)                  P → R       S(N)
//   3 P    S(1)  S(K)    M×N partial    R                     S(1)        S(K)
//
// Y and dY are placed `dst` (0 R, 1 S(0), 2 S(1)); forward redistributes Y src → dst, backward
// redistributes dY dst → the layout it needs and reduces the one partial gradient, if any. So
// src × dst covers S→R (all-gather), P→R (all-reduce), P→S (reduce-scatter), S(i)→S(j)
// (all-to-all), R→S (slice) and the copies.
//
// Example: p = 2, M = 3, N = 4, src = 1, dst = 2, part.M = 3,0, part.N = 1,3: rank 0 computes all
// three rows; the all-to-all sends rank 1 the 3×3 block of its columns; rank 1 sends nothing.
#include "shardcheck/parallel/kernel.hpp"

namespace shardcheck::par {

class redistribute_layer final : public kernel {
 public:
  redistribute_layer();
  [[nodiscard]] const kernel_info& info() const override { return info_; }
  [[nodiscard]] layout placement(tensor_slot t, const run_case& c) const override;
  [[nodiscard]] claims cost(const run_case& c, std::span<const int> coords) const override;
  void forward(context& ctx, const run_case& c, const forward_io& io) const override;
  void backward(context& ctx, const run_case& c, const backward_io& io) const override;

 private:
  kernel_info info_;
};

}  // namespace shardcheck::par
