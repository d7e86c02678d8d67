#pragma once
// The kernel interface: what a parallel GEMM gives shardcheck to be checked.
//
//   info()       its metadata, as a value: name, summary, parameters, layer counts, and the
//                dtypes, weight layouts and value modes it supports (the generators draw only
//                those; `list` shows them)
//   placement()  one placement per mesh axis for each tensor (X, W_1…W_L, Y, dY, dX, dW_1…dW_L)
//   forward()    Y from X and the weights, on this rank's blocks
//   backward()   dX and every dW from X, the weights and dY
//   cost()       optional claims: the collectives it issues, its peak bytes, its addition chains.
//                Each is optional; a property whose claim is absent is reported `not claimed`.
//   declines()   optional: why it declines a case its info().takes allows (none by default).
//   library_partitions()  optional: the partitions its library picks for a case (none: drawn).
//
// A single layer is a stack of one: ws has one weight. forward and backward see `any_matrix`
// values; io.visit runs a generic lambda on the case's element type, so a kernel is written once,
// as a template, with no macros and no explicit instantiation:
//
//   void forward(context& ctx, const run_case& c, const forward_io& io) const override {
//     io.visit([&]<class T>(const matrix<T>& x, weights<T> w, matrix<T>& y) { … });
//   }
//
// Everything else (data, blocks, checks, CLI, benchmarks) is derived from these, so adding a
// kernel is one file plus one registry line.
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "shardcheck/parallel/case.hpp"
#include "shardcheck/parallel/comm.hpp"
#include "shardcheck/parallel/ledger.hpp"
#include "shardcheck/parallel/matrix.hpp"
#include "shardcheck/parallel/placement.hpp"

namespace shardcheck::par {

// What a kernel runs on: the case's mesh (its comms record into the harness's ledger).
struct context {
  mesh& grid;
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
  // The value is a factor of the case's worker count p: it must divide p divided by the earlier
  // divides_p parameters, so that together they factorise p (dp, tp: pp = p/(dp·tp)).
  bool divides_p = false;
};

inline constexpr dtype all_dtypes[] = {dtype::f64, dtype::f32};
inline constexpr weight_layout all_layouts[] = {weight_layout::out_in, weight_layout::in_out};
// The precision policies of the 16-bit storage dtypes (types.hpp): f32 accumulation, partial sums
// reduced in f32 or in the storage dtype. A kernel lists those it supports in
// kernel_info::policies beside bf16 / f16 in its dtypes (a kernel that never reduces lists only
// the first: its reduce dtype is never used).
inline constexpr precision f32_policy{dtype::f32, dtype::f32};
inline constexpr precision storage_reduce_policies[] = {{dtype::f32, dtype::bf16},
                                                        {dtype::f32, dtype::f16}};
inline constexpr value_mode all_modes[] = {
    value_mode::exact,     value_mode::uniform,  value_mode::wide,    value_mode::cancel,
    value_mode::nonfinite, value_mode::positive, value_mode::zero_inf};

// What a kernel takes, as data (kernel_info::takes); a case outside it is declined: the generators
// never draw it, shrinking never moves to it, verify counts the draws declined, and a replay line
// of one is refused (exit 2) with the reason. Dimensions are named as in dim_names (M, N, K, and a
// stack's H, H2, …; a name the case does not have is ignored). A q × q grid that needs a row and a
// column per rank and K in pairs: {.min_dim = 1, .multiple_of = {{"K", 2}}, .no_empty_parts =
// true, .square_p = true}.
struct preconditions {
  std::int64_t min_dim = 0;                           // every dimension at least this long
  std::map<std::string, std::int64_t> min_size{};     // per dimension: {{"M", 4}} declines M = 3
  std::map<std::string, std::int64_t> multiple_of{};  // per dimension: {{"K", 2}} declines K = 5
  bool no_empty_parts = false;  // every part of every split non-empty (each rank holds a block)
  int min_p = 1;                // at least this many workers
  bool square_p = false;        // p a perfect square (1, 4, 9, …)
  bool power_of_two_p = false;  // p a power of two (1, 2, 4, …)
};
// "p a perfect square; every dimension ≥ 1; K a multiple of 2; no empty parts"; "" for none.
[[nodiscard]] std::string to_string(const preconditions& t);

// The settings under which a kernel claims bitwise-identical outputs for the same global case
// (kernel_info::invariant): the `invariance` property runs each case again under each claimed
// setting and compares every output's bits, wherever the elements are placed. Declared out here
// for the reason peak_claim is.
struct invariance_claim {
  bool workers = false;    // any other worker count p (the case's splits rebalanced)
  bool partition = false;  // any other partition of the splits it draws (uneven or balanced)
  bool backend = false;    // the other backend, and the native one's other algorithms
  std::vector<std::string> params{};  // parameters whose value never changes a bit
  [[nodiscard]] bool any() const { return workers || partition || backend || !params.empty(); }
};

struct kernel_info {
  std::string name;
  std::string summary;
  std::vector<param_spec> params;
  std::size_t min_layers = 1, max_layers = 1;
  std::vector<dtype> dtypes{std::begin(all_dtypes), std::end(all_dtypes)};
  std::vector<weight_layout> layouts{std::begin(all_layouts), std::end(all_layouts)};
  std::vector<value_mode> modes{std::begin(all_modes), std::end(all_modes)};
  // False for a kernel that never issues a collective (only point-to-point messages): a run
  // pinning the collectives' backend leaves it out.
  bool uses_collectives = true;
  // The precision policies it runs bf16 / f16 in (with those in dtypes); none by default. Such a
  // kernel runs them through forward_io::visit_mixed, which also hands it bfloat16_t and half_t.
  std::vector<precision> policies{};
  // The cases it takes (above); everything by default.
  preconditions takes{};
  // False: not deterministic by design (a library whose sums change order between runs, e.g.
  // one-sided accumulates): `determinism` is then reported `not claimed` and never run, while
  // `replicas` (ranks holding one block hold the same bits within a run) is still judged.
  bool deterministic = true;
  // Settings under which the kernel claims bitwise-identical outputs for the same global case
  // (TP- or batch-invariant modes); none by default (above).
  invariance_claim invariant{};

  [[nodiscard]] bool supports(dtype t) const;
  // t in dtypes and p in policies (with acc, reduce each f32 or t).
  [[nodiscard]] bool supports(dtype storage, const precision& p) const;
  [[nodiscard]] bool supports(weight_layout l) const;
  [[nodiscard]] bool supports(value_mode m) const;
};

// Longest chain of additions behind one element of each output of one layer (local share +
// reduction depth, reduction_depth(backend, collective, p, count) in ledger.hpp): y the chain of
// the layer's output, dx of its input gradient, dw of its weight gradient. `reduced` says how
// much of each chain is the reduction's (added across ranks, in the policy's reduce dtype); the
// rest is local (in the accumulation dtype). A kernel that leaves it zero claims every addition
// local, which a case with reduce=bf16 then holds it to. Row-parallel on 4 ranks, K = 64, a ring
// all-reduce: {.y = 16 + 3, .dx = N, .dw = M, .reduced = {.y = 3}}.
struct chain_lengths {
  std::int64_t y = 0, dx = 0, dw = 0;
  struct reduction_share {
    std::int64_t y = 0, dx = 0, dw = 0;
  } reduced{};
};

// Bytes the kernel allocates above its inputs, at most, in each phase (outputs included). Named
// claims::peak_claim; declared out here because clang cannot default-construct a nested struct
// with member initializers inside its enclosing class's std::optional (out.peak.emplace()).
struct peak_claim {
  std::int64_t forward = 0, backward = 0;
};

// A kernel's claims for one case on one rank. Each is optional.
struct claims {
  struct collective_claim {
    std::vector<ledger_entry> forward, backward;  // this rank's collectives and messages, in order
  };
  using peak_claim = par::peak_claim;
  std::optional<collective_claim> collectives;
  std::optional<peak_claim> peak;
  // One per layer (l = 1 … L at index l − 1).
  std::optional<std::vector<chain_lengths>> chains;
};

template <class T>
class weights {
 public:
  explicit weights(std::span<const any_matrix> ws) : ws_(ws) {}
  [[nodiscard]] std::size_t size() const { return ws_.size(); }
  [[nodiscard]] const matrix<T>& operator[](std::size_t l) const {
    return std::get<matrix<T>>(ws_[l]);
  }
  [[nodiscard]] std::span<const any_matrix> all() const { return ws_; }

 private:
  std::span<const any_matrix> ws_;
};

template <class T>
class gradients {
 public:
  explicit gradients(std::span<any_matrix> dws) : dws_(dws) {}
  [[nodiscard]] std::size_t size() const { return dws_.size(); }
  [[nodiscard]] matrix<T>& operator[](std::size_t l) const { return std::get<matrix<T>>(dws_[l]); }

 private:
  std::span<any_matrix> dws_;
};

// Thrown by visit on a bf16 / f16 case: the kernel declared no policies (complete_and_validate
// refuses such a case first).
[[noreturn]] void throw_not_declared();

// Calls run(std::type_identity<T>{}) with T the element type m holds: float or double, and with
// Mixed also bfloat16_t or half_t (without Mixed, a 16-bit m throws_not_declared and run is never
// instantiated for a 16-bit T).
namespace detail {
template <bool Mixed, class Run>
void dispatch(const any_matrix& m, Run&& run) {
  if (std::holds_alternative<matrix<float>>(m))
    run(std::type_identity<float>{});
  else if (std::holds_alternative<matrix<double>>(m))
    run(std::type_identity<double>{});
  else if constexpr (Mixed) {
    if (std::holds_alternative<matrix<bfloat16_t>>(m))
      run(std::type_identity<bfloat16_t>{});
    else
      run(std::type_identity<half_t>{});
  } else {
    throw_not_declared();
  }
}
}  // namespace detail

// forward's tensors: this rank's blocks of X and W_1…W_L; Y is the kernel's to fill.
struct forward_io {
  const any_matrix& x;
  std::span<const any_matrix> ws;
  any_matrix& y;
  // Runs f(const matrix<T>& x, weights<T> ws, matrix<T>& y) with T the case's element type; y
  // starts empty. T is float or double: a case in bf16 / f16 reaches only a kernel that declares
  // it, which calls visit_mixed.
  template <class F>
  void visit(F&& f) const {
    detail::dispatch<false>(x, [&]<class T>(std::type_identity<T>) { run<T>(f); });
  }
  // The same with T also bfloat16_t or half_t, for a kernel that lists policies.
  template <class F>
  void visit_mixed(F&& f) const {
    detail::dispatch<true>(x, [&]<class T>(std::type_identity<T>) { run<T>(f); });
  }

 private:
  template <class T, class F>
  void run(F& f) const {
    f(std::get<matrix<T>>(x), weights<T>(ws), y.template emplace<matrix<T>>());
  }
};

// backward's tensors: X, the weights and dY; dX and dW_1…dW_L are the kernel's to fill.
struct backward_io {
  const any_matrix& x;
  std::span<const any_matrix> ws;
  const any_matrix& dy;
  any_matrix& dx;
  std::span<any_matrix> dws;
  // Runs f(const matrix<T>& x, weights<T> ws, const matrix<T>& dy, matrix<T>& dx,
  //        gradients<T> dws); dx and every dW start empty. T is float or double (as forward_io).
  template <class F>
  void visit(F&& f) const {
    detail::dispatch<false>(x, [&]<class T>(std::type_identity<T>) { run<T>(f); });
  }
  // The same with T also bfloat16_t or half_t.
  template <class F>
  void visit_mixed(F&& f) const {
    detail::dispatch<true>(x, [&]<class T>(std::type_identity<T>) { run<T>(f); });
  }

 private:
  template <class T, class F>
  void run(F& f) const {
    for (any_matrix& dw : dws) dw.template emplace<matrix<T>>();
    f(std::get<matrix<T>>(x), weights<T>(ws), std::get<matrix<T>>(dy),
      dx.template emplace<matrix<T>>(), gradients<T>(dws));
  }
};

class kernel {
 public:
  virtual ~kernel() = default;
  [[nodiscard]] virtual const kernel_info& info() const = 0;
  // Mesh dimensions for p workers; their product is c.p.
  [[nodiscard]] virtual std::vector<int> mesh_dims(const run_case& c) const { return {c.p}; }
  // One placement per mesh axis for tensor t (t.layer picks W_l / dW_l in a stack).
  [[nodiscard]] virtual layout placement(tensor_slot t, const run_case& c) const = 0;
  // Splits the case needs beyond those its placements imply (splits_of), e.g. a pipeline's
  // layers over its stages; the generators draw them like any other partition.
  [[nodiscard]] virtual std::vector<split> extra_splits(const run_case& c) const {
    (void)c;
    return {};
  }
  // Why the kernel declines case c beyond what info().takes states (a shape its library refuses),
  // in a few words ("K odd: the library pairs columns"); none by default. Called by
  // complete_and_validate on a case that is otherwise complete and valid.
  [[nodiscard]] virtual std::optional<std::string> declines(const run_case& c) const {
    (void)c;
    return std::nullopt;
  }
  // The partitions the kernel's library picks for case c (its p and parameters complete), by
  // split key: PETSc's PETSC_DECIDE rows {{"M", partition::balanced(c.prob.M, c.p)}}, Global
  // Arrays' blocks of ⌈n/p⌉ ({{"M", 3,3,3,1}} for M = 10 on 4 ranks). complete_and_validate puts
  // them in the case, so its data, reference blocks and replica checks follow them and its replay
  // line records them; the generators draw only the other splits. None by default.
  [[nodiscard]] virtual std::map<std::string, partition> library_partitions(
      const run_case& c) const {
    (void)c;
    return {};
  }
  // For a kernel that splits its batch into micro-batches (a pipeline): the micro-batch global
  // row `row` of Y or dX belongs to, and how many there are, {i, m}; {−1, 0} by default. A
  // failure of a stack or a pipeline names the first micro-batch out of bound.
  [[nodiscard]] virtual std::pair<int, int> micro_batch_of(const run_case& c,
                                                           std::int64_t row) const {
    (void)c;
    (void)row;
    return {-1, 0};
  }
  // The claims for case c at mesh coordinates `coords`. None by default.
  [[nodiscard]] virtual claims cost(const run_case& c, std::span<const int> coords) const {
    (void)c;
    (void)coords;
    return {};
  }
  // \note collective over ctx.grid.
  virtual void forward(context& ctx, const run_case& c, const forward_io& io) const = 0;
  // \note collective over ctx.grid.
  virtual void backward(context& ctx, const run_case& c, const backward_io& io) const = 0;

  [[nodiscard]] const std::string& name() const { return info().name; }
};

// --- derived from placements: the same rules for every kernel --------------------------------

// Every tensor of case c: X, W_1…W_L, Y, dY, dX, dW_1…dW_L.
[[nodiscard]] std::vector<tensor_slot> tensors_of(const run_case& c);
// The outputs of case c: Y, dX, dW_1…dW_L.
[[nodiscard]] std::vector<tensor_slot> outputs_of(const run_case& c);
// "W" for a single layer, "W1", "W2", … in a stack; the other tensors by to_string(tensor).
[[nodiscard]] std::string name_of(tensor_slot s, const run_case& c);

// The problem dimension names of tensor t's rows and columns: X (M,K), W (N,K) or (K,N), Y and dY
// (M,N), dX (M,K), dW as W. In a stack, widths d_0 = K, d_1 = H, d_2 = H2, …, d_L = N: W_l is
// (d_l, d_{l−1}) or (d_{l−1}, d_l).
[[nodiscard]] std::pair<std::string, std::string> dim_names(tensor_slot t, const problem& p);
// M, N, K, or a hidden width H, H2, H3, ….
[[nodiscard]] std::int64_t dim_length(const problem& p, const std::string& name);

// Every split case c needs: those of the placements (a shard on an axis), then extra_splits.
[[nodiscard]] std::vector<split> splits_of(const kernel& k, const run_case& c);
// The partition key of dimension `dim` sharded on mesh axis `axis` of `axes`: "M", "K@1", ….
[[nodiscard]] std::string split_key(const std::string& dim, std::size_t axis, std::size_t axes);

// Consecutive global indices [offset, offset + length) of one dimension.
struct index_run {
  std::int64_t offset = 0, length = 0;
  friend bool operator==(const index_run&, const index_run&) = default;
};

// A rank's region of a global tensor: the rows it holds × the columns it holds, each a list of
// runs in increasing order; its local matrix packs them in that order (rows × cols, row-major),
// which for a block-cyclic placement is ScaLAPACK's local array, transposed to row-major.
// Contiguous (every S, R, P, On): one run each, [row0, row0 + rows) × [col0, col0 + cols), and
// row_runs/col_runs stay empty. Tiled (a BC dimension with two runs or more): row_runs (col_runs)
// lists them, rows (cols) is their total and row0 (col0) the first run's offset. Example: 10 rows
// BC(0,nb=3,src=1) on 2 coordinates, coordinate 1: row_runs {0,3},{6,3}, rows 6, row0 0.
struct block {
  std::int64_t row0 = 0, rows = 0, col0 = 0, cols = 0;
  std::vector<index_run> row_runs = {}, col_runs = {};
  friend bool operator==(const block&, const block&) = default;
};
// The runs of b's rows (columns): row_runs, or the one run {row0, rows} (none when rows = 0).
[[nodiscard]] std::vector<index_run> runs_of_rows(const block& b);
[[nodiscard]] std::vector<index_run> runs_of_cols(const block& b);
// The global index of local index i of a list of runs: {0,3},{6,3} maps local 4 to 7.
[[nodiscard]] std::int64_t global_index(std::span<const index_run> runs, std::int64_t i);
// What coordinate r of an axis of `coords` coordinates holds of [0, n) dealt in blocks of nb,
// block 0 on coordinate src (ScaLAPACK's numroc gives its total), adjacent runs merged: n = 10,
// nb = 3, src = 1, 2 coordinates: r = 1 holds {0,3},{6,3}; r = 0 holds {3,3},{9,1}. Throws
// invalid_problem for nb < 1, src or r outside [0, coords), or more than 2²⁴ blocks.
[[nodiscard]] std::vector<index_run> cyclic_runs(std::int64_t n, std::int64_t nb, int src,
                                                 int coords, int r);
[[nodiscard]] block block_of(const kernel& k, const run_case& c, tensor_slot t,
                             std::span<const int> coords);
// Rank r's coordinates on a mesh (row-major, as MPI_Cart_create without reordering).
[[nodiscard]] std::vector<int> coords_of(int rank, const std::vector<int>& dims);
// Thrown by complete_and_validate for a case the kernel declines (info().takes, declines()):
// what() is "square_grid declines the case: p=3 is not a perfect square", reason() the part after
// the colon.
struct case_declined : invalid_problem {
  case_declined(const std::string& kernel, std::string reason);
  [[nodiscard]] const std::string& reason() const { return reason_; }

 private:
  std::string reason_;
};

// Fills in default parameters, the partitions the kernel's library picks, and balanced
// partitions for the other splits the case lacks, then checks everything: dtype, layout and mode
// supported, mesh product, partitions (present, right length and part count, the library's where
// it picks them), parameters (declared, in range), that outputs are never partial. Throws
// invalid_problem, or case_declined for a case the kernel declines: what info().takes says of p
// and the dimensions once the parameters hold (before mesh_dims, which may assume it: a q × q
// grid), its empty parts and declines() last, on the complete case.
void complete_and_validate(const kernel& k, run_case& c);

}  // namespace shardcheck::par
