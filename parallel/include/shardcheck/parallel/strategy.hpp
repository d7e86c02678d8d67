#pragma once
// The strategy interface. A strategy is a name, the placements it expects and produces for each
// tensor, forward and backward on local shards, and a cost model: for a case and a rank, the exact
// collectives it will issue, its peak memory, and the longest addition chain of each output (which
// the error bound uses). Everything else (data, blocks, checks, CLI, benchmarks) is derived from
// these, so adding a strategy is one file plus one registry line.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "shardcheck/parallel/case.hpp"
#include "shardcheck/parallel/ledger.hpp"
#include "shardcheck/parallel/matrix.hpp"
#include "shardcheck/parallel/mpi.hpp"
#include "shardcheck/parallel/placement.hpp"

namespace shardcheck::par {

// What a strategy runs on: the case's mesh (communicators per axis, recording into the ledger).
struct context {
  mesh& grid;
  ledger& log;
};

// A split the case must carry a partition for: key (e.g. "M", or "K@1"), length, parts.
struct split {
  std::string key;
  std::int64_t length = 0;
  int parts = 1;
};

struct param_spec {
  std::string name;
  std::int64_t min = 0, max = 0, fallback = 0;
  std::string help;
  // A smaller value never raises the measured peak (e.g. a bucket size): the memory property
  // re-runs each case with a smaller value and checks exactly that.
  bool memory_monotone = false;
  // The value is a factor of the case's worker count p (e.g. the rows of a pr × (p/pr) mesh):
  // it must divide p divided by the earlier divides_p parameters, so that together they
  // factorise p (dp, tp: pp = p/(dp·tp)). The generators draw a random factorisation, in order,
  // and validation rejects any other value.
  bool divides_p = false;
};

// Longest chain of additions behind one element of each output (local share + reduction depth,
// reduction_depth(backend, collective, p, count) in ledger.hpp).
struct chain_lengths {
  std::int64_t y = 0, dx = 0, dw = 0;
};

// One tensor of a case: its kind and, for W and dW, its layer (0 is W_1). A stack of L layers has
// X, W_1…W_L, Y, dY, dX, dW_1…dW_L; a single layer has the six tensors of all_tensors.
struct tensor_slot {
  tensor t = tensor::x;
  std::size_t layer = 0;
  tensor_slot() = default;
  // NOLINTNEXTLINE(google-explicit-constructor): a tensor of a single layer is its slot
  tensor_slot(tensor kind, std::size_t l = 0) : t(kind), layer(l) {}
};
// Every tensor of case c, in that order.
[[nodiscard]] std::vector<tensor_slot> tensors_of(const run_case& c);
// The outputs of case c: Y, dX, dW_1…dW_L.
[[nodiscard]] std::vector<tensor_slot> outputs_of(const run_case& c);
// "W" for a single layer, "W1", "W2", … in a stack; the other tensors by to_string(tensor).
[[nodiscard]] std::string name_of(tensor_slot s, const run_case& c);

struct cost_estimate {
  std::vector<ledger_entry> forward, backward;  // this rank's collectives, in order
  // Bytes the strategy allocates above its inputs, at most, in each phase (its outputs included).
  std::int64_t peak_forward = 0, peak_backward = 0;
  chain_lengths chains;
  // A stack (L > 1): per layer l = 1 … L (index l − 1), y the chain of H_l, dx of dA_{l−1} (dX for
  // l = 1), dw of dW_l; `chains` is then unused.
  std::vector<chain_lengths> layer_chains;
};

class strategy {
 public:
  virtual ~strategy() = default;
  [[nodiscard]] virtual std::string name() const = 0;
  [[nodiscard]] virtual std::string summary() const = 0;
  [[nodiscard]] virtual std::vector<param_spec> params() const { return {}; }
  // The most layers a case of this strategy may have (problem::layers()); 1: a single layer.
  [[nodiscard]] virtual std::size_t max_layers() const { return 1; }
  // The fewest layers a case of this strategy may have.
  [[nodiscard]] virtual std::size_t min_layers() const { return 1; }
  // Splits the case needs beyond those its placements imply (splits_of), e.g. a pipeline's
  // layers over its stages; the generators draw them like any other partition.
  [[nodiscard]] virtual std::vector<split> extra_splits(const run_case& c) const {
    (void)c;
    return {};
  }
  // False for a strategy that never issues a collective (e.g. a pipeline's point-to-point
  // messages alone): a run pinning the collectives' backend leaves it out.
  [[nodiscard]] virtual bool uses_collectives() const { return true; }
  // Mesh dimensions for p workers; their product is c.p.
  [[nodiscard]] virtual std::vector<int> mesh_dims(const run_case& c) const { return {c.p}; }
  // One placement per mesh axis for each tensor.
  [[nodiscard]] virtual layout placement_of(tensor t, const run_case& c) const = 0;
  // The placement of W_{layer+1} or dW_{layer+1} (t is w or dw) in a stack; a single layer's is
  // placement_of(t, c).
  [[nodiscard]] virtual layout placement_of_layer(tensor t, std::size_t layer,
                                                  const run_case& c) const {
    (void)layer;
    return placement_of(t, c);
  }
  [[nodiscard]] virtual cost_estimate cost(const run_case& c, std::span<const int> coords) const = 0;
  // \note collective over ctx.grid. y is allocated by the strategy.
  virtual void forward(context& ctx, const run_case& c, const any_matrix& x, const any_matrix& w,
                       any_matrix& y) const = 0;
  // \note collective over ctx.grid. dx and dw are allocated by the strategy.
  virtual void backward(context& ctx, const run_case& c, const any_matrix& x, const any_matrix& w,
                        const any_matrix& dy, any_matrix& dx, any_matrix& dw) const = 0;
  // A stack: ws[l] is this rank's block of W_{l+1}; dws has one (empty) slot per layer, which the
  // strategy fills. A single layer runs forward / backward above.
  // \note collective over ctx.grid.
  virtual void forward_layers(context& ctx, const run_case& c, const any_matrix& x,
                              std::span<const any_matrix> ws, any_matrix& y) const {
    forward(ctx, c, x, ws.front(), y);
  }
  virtual void backward_layers(context& ctx, const run_case& c, const any_matrix& x,
                               std::span<const any_matrix> ws, const any_matrix& dy,
                               any_matrix& dx, std::span<any_matrix> dws) const {
    backward(ctx, c, x, ws.front(), dy, dx, dws.front());
  }
};

// The placement of any tensor of a case (tensors_of).
[[nodiscard]] layout placement_of(const strategy& s, tensor_slot t, const run_case& c);

// Implements the dtype dispatch: Derived provides
//   template <class T> void forward_t(context&, const run_case&, const matrix<T>& x,
//                                     const matrix<T>& w, matrix<T>& y) const;
//   template <class T> void backward_t(context&, const run_case&, const matrix<T>& x,
//                                      const matrix<T>& w, const matrix<T>& dy, matrix<T>& dx,
//                                      matrix<T>& dw) const;
// A stack strategy instead provides forward_layers_t and backward_layers_t (the signatures of
// SHARDCHECK_DECLARE_STACK_STRATEGY_MEMBERS); its single-layer forward and backward then run
// them with one weight. A single-layer strategy is adapted to forward_layers unchanged.
template <class Derived>
class strategy_base : public strategy {
 public:
  void forward(context& ctx, const run_case& c, const any_matrix& x, const any_matrix& w,
               any_matrix& y) const final {
    forward_layers(ctx, c, x, std::span<const any_matrix>(&w, 1), y);
  }
  void backward(context& ctx, const run_case& c, const any_matrix& x, const any_matrix& w,
                const any_matrix& dy, any_matrix& dx, any_matrix& dw) const final {
    backward_layers(ctx, c, x, std::span<const any_matrix>(&w, 1), dy, dx,
                    std::span<any_matrix>(&dw, 1));
  }
  void forward_layers(context& ctx, const run_case& c, const any_matrix& x,
                      std::span<const any_matrix> ws, any_matrix& y) const final {
    if (c.prob.type == dtype::f32) run<float>(ctx, c, x, ws, y);
    else run<double>(ctx, c, x, ws, y);
  }
  void backward_layers(context& ctx, const run_case& c, const any_matrix& x,
                       std::span<const any_matrix> ws, const any_matrix& dy, any_matrix& dx,
                       std::span<any_matrix> dws) const final {
    if (c.prob.type == dtype::f32) run_backward<float>(ctx, c, x, ws, dy, dx, dws);
    else run_backward<double>(ctx, c, x, ws, dy, dx, dws);
  }

 private:
  template <class T>
  void run(context& ctx, const run_case& c, const any_matrix& x, std::span<const any_matrix> ws,
           any_matrix& y) const {
    y.template emplace<matrix<T>>();
    if constexpr (requires { Derived::stacked_strategy; })
      self().template forward_layers_t<T>(ctx, c, std::get<matrix<T>>(x), ws,
                                          std::get<matrix<T>>(y));
    else
      self().template forward_t<T>(ctx, c, std::get<matrix<T>>(x),
                                   std::get<matrix<T>>(ws.front()), std::get<matrix<T>>(y));
  }
  template <class T>
  void run_backward(context& ctx, const run_case& c, const any_matrix& x,
                    std::span<const any_matrix> ws, const any_matrix& dy, any_matrix& dx,
                    std::span<any_matrix> dws) const {
    dx.template emplace<matrix<T>>();
    for (any_matrix& dw : dws) dw.template emplace<matrix<T>>();
    if constexpr (requires { Derived::stacked_strategy; })
      self().template backward_layers_t<T>(ctx, c, std::get<matrix<T>>(x), ws,
                                           std::get<matrix<T>>(dy), std::get<matrix<T>>(dx), dws);
    else
      self().template backward_t<T>(ctx, c, std::get<matrix<T>>(x),
                                    std::get<matrix<T>>(ws.front()), std::get<matrix<T>>(dy),
                                    std::get<matrix<T>>(dx), std::get<matrix<T>>(dws.front()));
  }
  const Derived& self() const { return static_cast<const Derived&>(*this); }
};

// Instantiates Derived's forward_t and backward_t for both dtypes; put it in the .cpp file that
// defines them, inside namespace shardcheck::par.
#define SHARDCHECK_INSTANTIATE_STRATEGY(Derived)                                                  \
  template void Derived::forward_t<float>(context&, const run_case&, const matrix<float>&,       \
                                          const matrix<float>&, matrix<float>&) const;           \
  template void Derived::forward_t<double>(context&, const run_case&, const matrix<double>&,     \
                                           const matrix<double>&, matrix<double>&) const;        \
  template void Derived::backward_t<float>(context&, const run_case&, const matrix<float>&,      \
                                           const matrix<float>&, const matrix<float>&,           \
                                           matrix<float>&, matrix<float>&) const;                \
  template void Derived::backward_t<double>(context&, const run_case&, const matrix<double>&,    \
                                            const matrix<double>&, const matrix<double>&,        \
                                            matrix<double>&, matrix<double>&) const

// Declares the members a strategy_base<Derived> defines in its .cpp file: summary, params,
// placement_of, cost, forward_t and backward_t; put it in the public part of the class.
#define SHARDCHECK_DECLARE_STRATEGY_MEMBERS                                                       \
  [[nodiscard]] std::string summary() const override;                                           \
  [[nodiscard]] std::vector<param_spec> params() const override;                                \
  [[nodiscard]] layout placement_of(tensor t, const run_case& c) const override;                \
  [[nodiscard]] cost_estimate cost(const run_case& c, std::span<const int> coords) const override; \
  template <class T>                                                                            \
  void forward_t(context& ctx, const run_case& c, const matrix<T>& x, const matrix<T>& w,       \
                 matrix<T>& y) const;                                                           \
  template <class T>                                                                            \
  void backward_t(context& ctx, const run_case& c, const matrix<T>& x, const matrix<T>& w,      \
                  const matrix<T>& dy, matrix<T>& dx, matrix<T>& dw) const

// The stack counterparts: forward_layers_t / backward_layers_t for both dtypes.
#define SHARDCHECK_INSTANTIATE_STACK_STRATEGY(Derived)                                            \
  template void Derived::forward_layers_t<float>(context&, const run_case&, const matrix<float>&, \
                                                 std::span<const any_matrix>, matrix<float>&)     \
      const;                                                                                    \
  template void Derived::forward_layers_t<double>(context&, const run_case&,                      \
                                                  const matrix<double>&,                          \
                                                  std::span<const any_matrix>, matrix<double>&)   \
      const;                                                                                    \
  template void Derived::backward_layers_t<float>(                                              \
      context&, const run_case&, const matrix<float>&, std::span<const any_matrix>,             \
      const matrix<float>&, matrix<float>&, std::span<any_matrix>) const;                       \
  template void Derived::backward_layers_t<double>(                                             \
      context&, const run_case&, const matrix<double>&, std::span<const any_matrix>,            \
      const matrix<double>&, matrix<double>&, std::span<any_matrix>) const

// Declares a stack strategy's members: summary, placement_of, cost, forward_layers_t (ws[l]: this
// rank's block of W_{l+1}, each a matrix<T>) and backward_layers_t (fills dws[l], already
// emplaced as matrix<T>); put it in the public part of the class, which also has
// `static constexpr bool stacked_strategy = true;` and overrides placement_of_layer, max_layers
// (and params) as it needs.
#define SHARDCHECK_DECLARE_STACK_STRATEGY_MEMBERS                                                 \
  [[nodiscard]] std::string summary() const override;                                           \
  [[nodiscard]] layout placement_of(tensor t, const run_case& c) const override;                \
  [[nodiscard]] cost_estimate cost(const run_case& c, std::span<const int> coords) const override; \
  template <class T>                                                                            \
  void forward_layers_t(context& ctx, const run_case& c, const matrix<T>& x,                    \
                        std::span<const any_matrix> ws, matrix<T>& y) const;                    \
  template <class T>                                                                            \
  void backward_layers_t(context& ctx, const run_case& c, const matrix<T>& x,                   \
                         std::span<const any_matrix> ws, const matrix<T>& dy, matrix<T>& dx,    \
                         std::span<any_matrix> dws) const

// --- derived from placements: the same rules for every strategy ------------------------------

// The problem dimension names of tensor t's rows and columns: X (M,K), W (N,K) or (K,N), Y and dY
// (M,N), dX (M,K), dW as W.
[[nodiscard]] std::pair<std::string, std::string> dim_names(tensor t, weight_layout l);
// In a stack, widths d_0 = K, d_1 = H, d_2 = H2, …, d_L = N: W_l is (d_l, d_{l−1}) or
// (d_{l−1}, d_l); a single layer's names are dim_names(t, l) above.
[[nodiscard]] std::pair<std::string, std::string> dim_names(tensor_slot t, const problem& p);
// M, N, K, or a hidden width H, H2, H3, ….
[[nodiscard]] std::int64_t dim_length(const problem& p, const std::string& name);

// Every split case c needs: those of the placements (a shard on an axis), then extra_splits.
[[nodiscard]] std::vector<split> splits_of(const strategy& s, const run_case& c);

// A rank's region of a global tensor.
struct block {
  std::int64_t row0 = 0, rows = 0, col0 = 0, cols = 0;
  friend bool operator==(const block&, const block&) = default;
};
[[nodiscard]] block block_of(const strategy& s, const run_case& c, tensor t,
                             std::span<const int> coords);
[[nodiscard]] block block_of(const strategy& s, const run_case& c, tensor_slot t,
                             std::span<const int> coords);
// Rank r's coordinates on a mesh (row-major, as MPI_Cart_create without reordering).
[[nodiscard]] std::vector<int> coords_of(int rank, const std::vector<int>& dims);
// Fills in balanced partitions and default parameters the case lacks, then checks everything:
// mesh product, partitions (present, right length and part count), parameters (declared, in
// range), that outputs are never partial. Throws invalid_problem.
void complete_and_validate(const strategy& s, run_case& c);

}  // namespace shardcheck::par
