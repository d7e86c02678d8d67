#pragma once
// Pipeline parallel over a stack of L layers (ReLU or identity between them), and the hybrid
// data × pipeline × tensor mesh built on the same schedule.
//
// Mesh dp × pp × tp (axes 0, 1, 2; tp the fastest-varying, so a tensor-parallel group is ranks
// next to each other). The pipeline strategies are dp = tp = 1, pp = p; `hybrid_mesh` draws dp and
// tp (params, a factorisation of p) and pp = p/(dp·tp).
//   stages   part.L splits the L layers over the pp stages in order, any sizes (an empty stage
//            passes activations through); stage s holds layers [l0_s, l1_s).
//   data     part.M splits the rows over dp; each dp rank splits its rows into m micro-batches,
//            balanced (m need not divide them; more micro-batches than rows leaves some empty).
//   tensor   with tp > 1, layer l (0-based) is Megatron's column layer for even l (W_l split on
//            its outputs) and row layer for odd l (split on its inputs, partial sums all-reduced
//            over tp): the activation between them is sharded by the same partition (part.D@2),
//            so each tp rank sends its shard to the same tp rank of the next stage.
//   placements (dp, pp, tp): X S(0),On(0),R   Y and dY S(0),On(pp−1),S(1) if the last layer is a
//            column layer else R   W_l and dW_l R,On(stage of l),S(·) for tp > 1   dX like X.
//            dp = 1 puts R on the dp axis and tp = 1 R on the tp axis.
//
// forward runs the m micro-batches through the stages (no state kept). backward runs one training
// step: forward and backward of every micro-batch in the order of the schedule, each stage
// keeping the activations at its layer boundaries from a micro-batch's forward to its backward:
//   GPipe  F0 … F(m−1), then B0 … B(m−1): stage s holds all m micro-batches' activations;
//   1F1B   min(pp−s−1, m) warm-up forwards, then F and B alternating, then the remaining B:
//          stage s holds at most min(m, pp − s) of them.
// Messages go point-to-point between neighbouring stages, tagged with the micro-batch; a sender
// waits for its previous message in the same direction before posting the next. dW_l accumulates
// over the micro-batches, then each rank's dW (all its layers in one buffer) is all-reduced over
// dp only. The cost model lists every message and collective in schedule order and bounds the
// peak: the activations held (m or min(m, pp − s) micro-batches of the largest size), one
// micro-batch's working buffers, the outputs and the dp buffer.
//
// Example: p = 4, L = 3, part.L = 1,2,0,0, 1F1B, m = 3: stage 0 (layer 1) warms up with
// min(3, 3) forwards and runs F0 F1 F2 B0 B1 B2, holding all three micro-batches; stage 2 (no
// layer) runs F0 F1 B0 F2 B1 B2, holding two; stage 3 (no layer, the last) runs
// F0 B0 F1 B1 F2 B2, receiving Y's rows and sending dY's back, holding one.
//
// bf16 / f16 (acc=f32 reduce=f32 only): each layer sums in f32 (the tp all-reduces too), then
// stores its output in the storage dtype, so the boundaries are kept and sent in it; dW is summed
// over the micro-batches in f32, all-reduced over dp in f32 and rounded once (reference/stack.hpp
// stack_storage computes the same stack).
#include <vector>

#include "shardcheck/parallel/kernel.hpp"

namespace shardcheck::par {

enum class pipeline_schedule { gpipe, one_f_one_b };

class pipeline : public kernel {
 public:
  // hybrid = false: dp = tp = 1 (the pipeline alone, pipeline_gpipe or pipeline_1f1b); true: dp
  // and tp are parameters (hybrid_mesh).
  pipeline(pipeline_schedule sched, bool hybrid);
  [[nodiscard]] const kernel_info& info() const override { return info_; }
  [[nodiscard]] std::vector<int> mesh_dims(const run_case& c) const override;
  [[nodiscard]] std::vector<split> extra_splits(const run_case& c) const override;
  [[nodiscard]] layout placement(tensor_slot t, const run_case& c) const override;
  [[nodiscard]] claims cost(const run_case& c, std::span<const int> coords) const override;
  [[nodiscard]] std::pair<int, int> micro_batch_of(const run_case& c,
                                                   std::int64_t row) const override;
  void forward(context& ctx, const run_case& c, const forward_io& io) const override;
  void backward(context& ctx, const run_case& c, const backward_io& io) const override;

 private:
  pipeline_schedule schedule_;
  bool hybrid_;
  kernel_info info_;
};

}  // namespace shardcheck::par
