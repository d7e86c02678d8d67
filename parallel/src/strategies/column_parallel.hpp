#pragma once
// Column parallel (Megatron's ColumnParallelLinear). W is split on the output features N
// (partition part.N), X replicated; each rank computes Y_r = X·W_rᵀ, the M×n_r column block of Y,
// which is left sharded (gather=0, Y = S(1)) or all-gathered (gather=1, Y = R). Y is row-major M×N,
// so a column block is not contiguous: the all-gather runs on a packed buffer (rank blocks one after
// another, counts M·n_r) which is then re-laid into M×N.
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
#include "shardcheck/parallel/strategy.hpp"

namespace shardcheck::par {

class column_parallel : public strategy_base<column_parallel> {
 public:
  // Deliberate defects, used only by shardcheck's mutants to prove that its properties fire.
  enum class defect { none, reversed_order };

  explicit column_parallel(defect d = defect::none, std::string name = "column_parallel")
      : defect_(d), name_(std::move(name)) {}

  [[nodiscard]] std::string name() const override { return name_; }
  SHARDCHECK_DECLARE_STRATEGY_MEMBERS;

 private:
  defect defect_;
  std::string name_;
};

}  // namespace shardcheck::par
