#pragma once
// Sequence-parallel pair (Megatron's sequence parallelism around the column → row MLP): the same
// split of W_1 and W_2 on part.H as column_row_pair (layer_pair.hpp), but X, Y, dY and dX stay
// sharded by rows (S(0), part.M) outside the pair. Forward all-gathers X (counts m_r·K) before the
// column layer and reduce-scatters the row layer's partial M×N output to S(0) (counts m_r·N).
// Backward mirrors it: all-gather dY, compute as column_row_pair, reduce-scatter the partial dX to
// S(0). A stateless kernel keeps nothing between the phases, so backward also all-gathers X
// again (dW_1 = dH_1ᵀ·X and the recomputed H_1 need every row), as Megatron does when it does not
// keep the gathered input.
//
//   out_in: X S(0)  W1 S(0)  W2 S(1)  Y S(0)  dY S(0)  dX S(0)  dW1 S(0)  dW2 S(1)
//   in_out: X S(0)  W1 S(1)  W2 S(0)  Y S(0)  dY S(0)  dX S(0)  dW1 S(1)  dW2 S(0)
//   forward:  all-gather X, reduce-scatter Y
//   backward: all-gather X, all-gather dY, reduce-scatter dX
#include "strategies/layer_pair.hpp"

namespace shardcheck::par {

class sequence_parallel_pair final : public layer_pair {
 public:
  sequence_parallel_pair();
  [[nodiscard]] claims cost(const run_case& c, std::span<const int> coords) const override;
  void forward(context& ctx, const run_case& c, const forward_io& io) const override;
  void backward(context& ctx, const run_case& c, const backward_io& io) const override;
};

}  // namespace shardcheck::par
