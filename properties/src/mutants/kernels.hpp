#pragma once
// Mutant kernels: decorators around a registered kernel, and subclasses of strategies through
// their protected hooks. Each carries the info of what it wraps under the mutant's name, and
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

// The defects inside one strategy's algorithm, by operator name: ignores_bucket (a decorator of
// `host`, sharded_weights), and the hook subclasses reuses_buffer, padded_buckets,
// w_panel_wrong_row, keeps_activations, dw_over_world. nullptr for another name, or without the
// host a decorator needs.
[[nodiscard]] std::unique_ptr<par::kernel> make_subclass(const std::string& op,
                                                         const par::kernel* host,
                                                         const std::string& name,
                                                         std::shared_ptr<fire_log> log);

}  // namespace shardcheck::prop::mutants
