#pragma once
// Mutant kernels: decorators around a registered kernel, some with a collectives layer of their
// own (make_algorithm_mutant). Each carries the info of what it wraps under the mutant's name, and
// counts in a fire_log how often its defect acted.
//
// Example: float_inputs around data_parallel, a f64 case with X = [0.1 0.2]: the inner forward
// runs on X = [0.100000001490116 0.200000002980232] (each value rounded to float and back); its
// cases are drawn as f64 only.
#include <memory>
#include <string>

#include "mutants/faults.hpp"
#include "shardcheck/parallel/kernel.hpp"

namespace shardcheck::prop::mutants {

// Forwards everything to `inner` except info(): inner's, renamed.
class kernel_decorator : public par::kernel {
 public:
  kernel_decorator(const par::kernel& inner, std::string name, std::shared_ptr<fire_log> log);
  [[nodiscard]] const par::kernel_info& info() const override { return info_; }
  [[nodiscard]] std::vector<int> mesh_dims(const par::run_case& c) const override {
    return inner_.mesh_dims(c);
  }
  [[nodiscard]] par::layout placement(par::tensor_slot t, const par::run_case& c) const override {
    return inner_.placement(t, c);
  }
  [[nodiscard]] std::vector<par::split> extra_splits(const par::run_case& c) const override {
    return inner_.extra_splits(c);
  }
  [[nodiscard]] std::optional<std::string> declines(const par::run_case& c) const override {
    return inner_.declines(c);
  }
  [[nodiscard]] std::map<std::string, par::partition> library_partitions(
      const par::run_case& c) const override {
    return inner_.library_partitions(c);
  }
  [[nodiscard]] std::pair<int, int> micro_batch_of(const par::run_case& c,
                                                   std::int64_t row) const override {
    return inner_.micro_batch_of(c, row);
  }
  [[nodiscard]] par::claims cost(const par::run_case& c,
                                 std::span<const int> coords) const override {
    return inner_.cost(c, coords);
  }
  void forward(par::context& ctx, const par::run_case& c,
               const par::forward_io& io) const override {
    inner_.forward(ctx, c, io);
  }
  void backward(par::context& ctx, const par::run_case& c,
                const par::backward_io& io) const override {
    inner_.backward(ctx, c, io);
  }

 protected:
  void fired() const { ++log_->acts; }
  const par::kernel& inner_;
  par::kernel_info info_;
  std::shared_ptr<fire_log> log_;
};

// X, the weights (and dY in backward) rounded to float before the inner kernel runs; f64 cases
// only. The rounded copies are hidden from the memory meter.
class float_inputs final : public kernel_decorator {
 public:
  float_inputs(const par::kernel& inner, std::string name, std::shared_ptr<fire_log> log);
  void forward(par::context& ctx, const par::run_case& c, const par::forward_io& io) const override;
  void backward(par::context& ctx, const par::run_case& c,
                const par::backward_io& io) const override;
};

// Forward keeps a copy of every weight block it holds in a std::vector while the inner forward
// runs: memory the claims do not state (seen in binaries whose operator new is tracked).
class copies_w final : public kernel_decorator {
 public:
  using kernel_decorator::kernel_decorator;
  void forward(par::context& ctx, const par::run_case& c, const par::forward_io& io) const override;
};

// The last weight's local block with its rows in reverse order, in forward and backward (a
// wrong shard of W_L: for a pair, W2's). The copies are hidden from the memory meter.
class last_w_rows_reversed final : public kernel_decorator {
 public:
  using kernel_decorator::kernel_decorator;
  void forward(par::context& ctx, const par::run_case& c, const par::forward_io& io) const override;
  void backward(par::context& ctx, const par::run_case& c,
                const par::backward_io& io) const override;
};

// When some rank holds no rows (part.M has an empty part, and M > 0), every rank's Y comes out
// with its first element one too large: an empty-shard defect for the final shrinking pass's
// test, not in the selftest's matrix. data_parallel p=4 M=3 part.M=0,0,0,3 fails forward, and so
// does p=2 M=1 N=1 K=0 part.M=1,0 (Y = 0 computed as 1); p=2 M=4 part.M=2,2 passes.
class empty_shard_off_by_one final : public kernel_decorator {
 public:
  using kernel_decorator::kernel_decorator;
  void forward(par::context& ctx, const par::run_case& c, const par::forward_io& io) const override;
};

// Forward drops the last term of each rank's local contraction: the last column of its X block
// zeroed (an off-by-one loop bound, `k < K − 1`). One term of K at p = 1 and in data_parallel; one
// per K part in row_parallel. Its error is about one product, |x||w|, a share 1/K of mag: far
// past the rigorous bound at small K, and at K = 16384 within it but outside the statistical
// one (docs/numerics.md). The copy is hidden from the memory meter.
class last_k_dropped final : public kernel_decorator {
 public:
  using kernel_decorator::kernel_decorator;
  void forward(par::context& ctx, const par::run_case& c, const par::forward_io& io) const override;
};

// Claims the collectives of the default algorithms whatever the case chose: cost() sees the case
// with backend=native:all_reduce=tree as plain backend=native, while the collectives run the
// tree. The ledger test of the tree's formulas, outside the selftest's matrix: data_parallel at
// p = 4 claims the ring's 2n − c_me − c_{me+1} = 1.5n per rank for dW's all-reduce where the tree
// moves 2n on ranks 0 and 2, n on ranks 1 and 3 (p = 2 moves n either way: no difference).
class default_claims final : public kernel_decorator {
 public:
  using kernel_decorator::kernel_decorator;
  [[nodiscard]] par::claims cost(const par::run_case& c,
                                 std::span<const int> coords) const override;
};

// The defects inside one strategy's algorithm, acted from outside it: a decorator of the
// registered strategy (`host`) and, for some, a collectives layer on the case's comms that shares
// the decorator's state for the run (the case, this rank's W, whether forward runs). Nothing
// under parallel/ knows about them:
//   ignores_bucket     sharded_weights  forward runs on the case with an unbounded bucket while
//                                       cost() states the case's own (memory)
//   padded_buckets     sharded_weights  forward holds, in tracked memory, the bytes by which
//                                       padding every bucket's buffer to a full bucket raises
//                                       the pair alive at once, and cost() states them: within
//                                       the bound, but a smaller bucket can raise the peak
//                                       (memory, its monotone re-run)
//   reuses_buffer      sharded_weights  a layer below the checker on axis 0: in forward, with
//                                       overlap=1, the gather of bucket i+1 lands in bucket i's
//                                       buffer, still read by bucket i's products (forward)
//   w_panel_wrong_row  summa            a layer above the checker on axis 0: each W panel's
//                                       broadcast rooted at the next mesh row, which sends its
//                                       own W rows at the panel's offset (ledger: the root;
//                                       forward)
//   keeps_activations  pipeline_1f1b    backward holds, in tracked memory, the boundaries of the
//                                       micro-batches 1F1B frees and GPipe keeps (memory)
//   skips_zeros        column_parallel  forward's local product skips zero activations, so
//                                       0·Inf = NaN never reaches Y (gather=0, f32 and f64;
//                                       forward, on zero_inf data)
//   dw_over_world      hybrid_mesh      a layer above the checker on axis 0: dW's all-reduce
//                                       sent to the whole mesh's comm, every rank's buffer
//                                       padded to the largest (ledger: the axis; backward)
struct algorithm_mutant {
  std::unique_ptr<par::kernel> k;  // nullptr for another operator name
  par::layer_wrapper wrap;         // empty: no layer
};
[[nodiscard]] algorithm_mutant make_algorithm_mutant(const std::string& op, const par::kernel& host,
                                                     const std::string& name,
                                                     std::shared_ptr<fire_log> log);

}  // namespace shardcheck::prop::mutants
