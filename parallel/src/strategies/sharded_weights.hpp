#pragma once
// Sharded weights (ZeRO-3 / FSDP style). W is sharded by rows under its own partition (part.N in
// out_in, where W's rows are output features; part.K in in_out, where they are input features);
// X is sharded by batch rows (part.M). Forward gathers W in buckets of contiguous W rows and
// multiplies each against the local rows of X; backward re-gathers W bucket by bucket for dX and
// reduce-scatters each bucket's dW partial sums to the rows' owners (dW placed as W).
//
//   X: S(0)  W: S(0)  Y: S(0)      dY: S(0)  dX: S(0)  dW: S(0)
//
// Buckets. Let R be W's row count, C its column count, s the element size and B the parameter
// `bucket` (bytes). A bucket holds b = min(R, max(1, ⌊B / (C·s)⌋)) rows (b = R when C·s = 0):
// at least one row, so a B smaller than a row still makes progress — a bucket is then one row of
// C·s > B bytes. Bucket i is W rows [i·b, min(R, (i+1)·b)); there are ⌈R / b⌉ of them (none when
// R = 0). Rank q contributes its rows that fall inside, |[lo, hi) ∩ part q|·C elements (often 0),
// so one all-gather-v per bucket works for any partition, uneven and empty parts included.
// B ≥ R·C·s is the unbounded baseline: one bucket holding all of W.
//
// Double buffering (overlap=1): the non-blocking gather of bucket i+1 is started (its buffer
// allocated, this rank's rows copied in) before bucket i is multiplied, and bucket i is released
// as soon as its products are done. overlap=0 waits for each gather before multiplying: the same
// buckets and collectives, no overlap (the benchmark's baseline).
//
//   forward:  per bucket one all-gather (counts |bucket ∩ part q|·C), in bucket order
//   backward: per bucket one all-gather of W, then one reduce-scatter of that bucket's dW
//             partial sums (counts as the gather); with overlap=1 the gather of bucket i+1 is
//             started before bucket i's reduce-scatter: AG0 AG1 RS0 AG2 RS1 … RS(n−1)
//
// Memory (bytes per rank). Held by the harness, outside the measured scope: the X shard
// (M_r·K·s), the W shard (R_r·C·s), the dY shard (M_r·N·s). Allocated by the kernel, in the
// bound the cost model states (the two buckets alive at once are consecutive, so together they
// hold at most min(2b, R) rows — the last bucket may be short):
//   forward  ≤ Y shard M_r·N·s + min(2b, R)·C·s
//   backward ≤ dX shard M_r·K·s + dW shard R_r·C·s + min(2b, R)·C·s
// In backward the pair alive at once is W bucket i+1 with W bucket i (while dX uses bucket i) or
// with bucket i's dW partial sums (same size as bucket i; W bucket i is freed first). Nothing
// else is allocated: counts live in the communicator's scratch. So the full per-rank footprint,
// inputs included, is forward (M_r·K + R_r·C + M_r·N + min(2b, R)·C)·s; a smaller B never raises
// it, which the `memory` property checks by re-running each case with a smaller B (`bucket` is
// declared memory-monotone).
//
// Error chains: Y sums over K in one product (out_in) or bucket after bucket into the same
// accumulator (in_out): K. dX likewise over N. dW: the local rows M_r, then the reduction.
//
// Example: p = 2, out_in, N = 5, K = 4, part.N = 3,2, f64, bucket=64: a row is 32 B, b = 2,
// buckets rows 0–1, 2–3, 4; gather counts 8,0 then 4,4 then 0,4 elements.
//
// bf16 / f16 (acc=f32, reduce=f32 or the storage dtype): W's buckets are gathered in the storage
// dtype and widened to f32 for their products; Y and dX are summed in f32 across the buckets and
// rounded once; each bucket's dW partial is f32 and reduce-scattered as the policy says
// (mixed_ops.hpp). The f32 copies are added to both peaks.
#include <algorithm>
#include <cstdint>
#include <string>

#include "shardcheck/parallel/kernel.hpp"

namespace shardcheck::par {

// The bucket plan of a case: rows per bucket and the bucket count (see above).
struct bucket_plan {
  std::int64_t rows = 0, cols = 0;  // W's R and C
  std::int64_t per_bucket = 0;      // b
  std::int64_t count = 0;           // ⌈R / b⌉
  [[nodiscard]] std::int64_t lo(std::int64_t i) const { return i * per_bucket; }
  // min(R, (i + 1)·b) for i < count, in a form that cannot overflow (lo(i) < R there).
  [[nodiscard]] std::int64_t hi(std::int64_t i) const {
    return lo(i) + std::min(per_bucket, rows - lo(i));
  }
  // Rows of the largest pair of consecutive buckets: min(2b, R) (b ≤ R), without forming 2b.
  [[nodiscard]] std::int64_t pair_rows() const {
    return per_bucket + std::min(per_bucket, rows - per_bucket);
  }
};
// The plan for a budget of `bytes` per bucket; plan_buckets(c) is that of B = c.param("bucket").
[[nodiscard]] bucket_plan plan_buckets(const run_case& c, std::int64_t bytes);
[[nodiscard]] bucket_plan plan_buckets(const run_case& c);
// W's row key in the case's partitions: "N" (out_in) or "K" (in_out).
[[nodiscard]] std::string weight_row_key(const run_case& c);

class sharded_weights : public kernel {
 public:
  sharded_weights();
  [[nodiscard]] const kernel_info& info() const override { return info_; }
  [[nodiscard]] layout placement(tensor_slot t, const run_case& c) const override;
  [[nodiscard]] claims cost(const run_case& c, std::span<const int> coords) const override;
  void forward(context& ctx, const run_case& c, const forward_io& io) const override;
  void backward(context& ctx, const run_case& c, const backward_io& io) const override;

 private:
  kernel_info info_;
};

}  // namespace shardcheck::par
