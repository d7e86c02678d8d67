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
#include "shardcheck/parallel/strategy.hpp"

namespace shardcheck::par {

class data_parallel : public strategy_base<data_parallel> {
 public:
  // Deliberate defects, used only by shardcheck's mutants to prove that its properties fire.
  enum class defect { none, drop_last_shard, reversed_order, no_dw_all_reduce, float_compute,
                      copies_w, rank0_skips_gather, rank0_waits_forever, extra_barrier,
                      order_alternates, rank_order_sum };

  explicit data_parallel(defect d = defect::none, std::string name = "data_parallel")
      : defect_(d), name_(std::move(name)) {}

  [[nodiscard]] std::string name() const override { return name_; }
  SHARDCHECK_DECLARE_STRATEGY_MEMBERS;

 private:
  defect defect_;
  std::string name_;
  mutable std::uint64_t calls_ = 0;  // only the order_alternates defect reads it
};

}  // namespace shardcheck::par
