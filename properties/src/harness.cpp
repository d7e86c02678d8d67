#include "shardcheck/properties/harness.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <type_traits>
#include <variant>

#include "shardcheck/parallel/memory.hpp"
#include "shardcheck/parallel/pmpi.hpp"
#include "shardcheck/reference/bound.hpp"
#include "shardcheck/reference/check.hpp"
#include "shardcheck/reference/data.hpp"
#include "shardcheck/reference/gemm.hpp"
#include "shardcheck/reference/mixed.hpp"
#include "shardcheck/reference/stack.hpp"

namespace shardcheck::prop {

using par::any_matrix;
using par::block;
using par::matrix;
using par::tensor;
using par::tensor_slot;

std::string_view to_string(property p) {
  switch (p) {
    case property::runs: return "runs";
    case property::forward: return "forward";
    case property::backward: return "backward";
    case property::ledger: return "ledger";
    case property::memory: return "memory";
    case property::determinism: return "determinism";
    case property::replicas: return "replicas";
  }
  return "?";
}

unsigned parse_properties(std::string_view s) {
  if (s == "all") return all_properties;
  unsigned mask = static_cast<unsigned>(property::runs);
  std::size_t pos = 0;
  while (pos <= s.size()) {
    const std::size_t comma = s.find(',', pos);
    const std::string_view name = s.substr(pos, comma == s.npos ? s.npos : comma - pos);
    bool found = name == "runs";
    for (property p : checked_properties)
      if (to_string(p) == name) {
        mask |= static_cast<unsigned>(p);
        found = true;
      }
    if (!found)
      throw invalid_problem("unknown property '" + std::string(name) +
                            "' (known: runs, forward, backward, ledger, memory, determinism, "
                            "replicas)");
    if (comma == s.npos) break;
    pos = comma + 1;
  }
  return mask;
}

std::string properties_to_string(unsigned mask) {
  std::string out;
  for (property p : checked_properties) {
    if ((mask & static_cast<unsigned>(p)) == 0) continue;
    if (!out.empty()) out += ',';
    out += to_string(p);
  }
  return out.empty() ? std::string(to_string(property::runs)) : out;
}

namespace {

// The local matrix of input t over the given runs of global rows and columns, packed in order:
// rows {0,2},{4,2} × cols {0,3} are global rows 0, 1, 4, 5 of columns 0-2. Throws
// invalid_problem when its size does not fit in memory's index range.
template <class T>
matrix<T> generate(const par::run_case& c, tensor_slot t, std::span<const par::index_run> rows,
                   std::span<const par::index_run> cols) {
  std::int64_t nr = 0, nc = 0;
  for (const par::index_run& r : rows) nr += r.length;
  for (const par::index_run& r : cols) nc += r.length;
  if (nc > 0 && nr > static_cast<std::int64_t>(SIZE_MAX / sizeof(T)) / nc)
    throw invalid_problem(par::name_of(t, c) + " block of " + std::to_string(nr) + "×" +
                          std::to_string(nc) + " elements is too large to allocate");
  matrix<T> m(static_cast<std::size_t>(nr), static_cast<std::size_t>(nc));
  std::vector<T> tile;
  const int grid = c.mode == value_mode::exact ? std::max(ref::exact_grid_of(c.prob), 0) : 3;
  std::size_t i0 = 0;
  for (const par::index_run& r : rows) {
    std::size_t j0 = 0;
    for (const par::index_run& q : cols) {
      const auto tr = static_cast<std::size_t>(r.length), tc = static_cast<std::size_t>(q.length);
      const bool direct = cols.size() == 1;  // the tile is whole rows of m
      if (!direct) tile.resize(tr * tc);
      T* at = direct ? m.row(i0) : tile.data();
      ref::fill_block<T>(c.mode, c.seed, par::data_id_of(t), static_cast<std::uint64_t>(r.offset),
                         tr, static_cast<std::uint64_t>(q.offset), tc, at, 0, grid);
      if (!direct)
        for (std::size_t i = 0; i < tr; ++i)
          std::copy(tile.begin() + static_cast<std::ptrdiff_t>(i * tc),
                    tile.begin() + static_cast<std::ptrdiff_t>((i + 1) * tc), m.row(i0 + i) + j0);
      j0 += tc;
    }
    i0 += static_cast<std::size_t>(r.length);
  }
  return m;
}

template <class T>
matrix<T> generate(const par::run_case& c, tensor_slot t, std::int64_t row0, std::int64_t rows,
                   std::int64_t col0, std::int64_t cols) {
  const par::index_run r{row0, rows}, q{col0, cols};
  return generate<T>(c, t, std::span(&r, rows > 0 ? 1 : 0), std::span(&q, cols > 0 ? 1 : 0));
}

any_matrix generate_block(const par::run_case& c, const par::tensor_plan& t) {
  const auto rows = par::runs_of_rows(t.region), cols = par::runs_of_cols(t.region);
  switch (c.prob.type) {
    case dtype::f32: return generate<float>(c, t.slot, rows, cols);
    case dtype::bf16: return generate<bfloat16_t>(c, t.slot, rows, cols);
    case dtype::f16: return generate<half_t>(c, t.slot, rows, cols);
    case dtype::f64: break;
  }
  return generate<double>(c, t.slot, rows, cols);
}

struct expectation {
  any_matrix value;
  std::vector<double> mag;  // |X||W|ᵀ; a stack's rigorous bound
  std::int64_t k_ref = 0;
  std::int64_t flops = 0, panel_bytes = 0;  // what computing it took (verdict::check_flops)
  // A stack's: its statistical bound (empty when the tier is off) and its magnitude product.
  std::vector<double> stat_bound, stack_mag;
};

// Output t's inner (contraction) dimension: K for Y, N for dX, M for dW.
std::int64_t inner_of(const problem& p, tensor t) {
  return t == tensor::y ? p.K : t == tensor::dx ? p.N : p.M;
}

// One run of n (none when empty).
std::vector<par::index_run> run_list(par::index_run r) {
  if (r.length == 0) return {};
  return {r};
}

// The reference for block b of output t in S, from exactly the inputs it depends on (`gen(t,
// row runs, column runs)` makes them: the case's values in S, or widened from a 16-bit T),
// summed over the inner indices `inner` only: [0, K) gives Y's block whole; [0, K/2) and
// [K/2, K), each on one rank, give two parts whose sum is it (exact-mode values sum exactly in
// any order).
template <class S, class Generate>
expectation expect_from(const par::run_case& c, tensor t, const block& b, par::index_run inner,
                        const Generate& gen) {
  const auto& p = c.prob;
  const bool out_in = p.layout == weight_layout::out_in;
  const auto rows = static_cast<std::size_t>(b.rows), cols = static_cast<std::size_t>(b.cols);
  expectation e;
  e.value = par::make_matrix<S>(rows, cols);
  e.mag.assign(rows * cols, 0.0);
  // value and magnitude: 2 flops per multiply-add each; the panels: (rows + cols) × inner.
  e.flops =
      checked_mul(checked_mul(4 * b.rows, b.cols, "check flops"), inner.length, "check flops");
  e.panel_bytes =
      checked_mul(checked_add(b.rows, b.cols, "check bytes"), inner.length, "check bytes") *
      static_cast<std::int64_t>(sizeof(S));
  S* out = std::get<matrix<S>>(e.value).data.data();
  if (inner.length == 0) {  // no inner index here: a zero part
    e.k_ref = inner_of(p, t);
    return e;
  }
  const auto b_rows = par::runs_of_rows(b), b_cols = par::runs_of_cols(b);
  const auto in = run_list(inner);
  if (t == tensor::y) {
    const auto x = gen(tensor::x, b_rows, in);
    const auto w = out_in ? gen(tensor::w, b_cols, in) : gen(tensor::w, in, b_cols);
    const auto k = static_cast<std::size_t>(inner.length);
    ref::linear_forward<S>(p.layout, rows, cols, k, x.data.data(), w.data.data(), out);
    ref::magnitude_forward<S>(p.layout, rows, cols, k, x.data.data(), w.data.data(), e.mag.data());
    e.k_ref = p.K;
  } else if (t == tensor::dx) {
    const auto dy = gen(tensor::dy, b_rows, in);
    const auto w = out_in ? gen(tensor::w, in, b_cols) : gen(tensor::w, b_cols, in);
    const auto n = static_cast<std::size_t>(inner.length);
    ref::linear_backward_dx<S>(p.layout, rows, n, cols, dy.data.data(), w.data.data(), out);
    ref::magnitude_backward_dx<S>(p.layout, rows, n, cols, dy.data.data(), w.data.data(),
                                  e.mag.data());
    e.k_ref = p.N;
  } else {
    // out_in: dW block is (N rows) × (K cols) = dY[:, rows]ᵀ · X[:, cols];
    // in_out: (K rows) × (N cols) = X[:, rows]ᵀ · dY[:, cols].
    const auto& n_runs = out_in ? b_rows : b_cols;
    const auto& k_runs = out_in ? b_cols : b_rows;
    const std::int64_t nn = out_in ? b.rows : b.cols, kk = out_in ? b.cols : b.rows;
    const auto dy = gen(tensor::dy, in, n_runs);
    const auto x = gen(tensor::x, in, k_runs);
    const auto m = static_cast<std::size_t>(inner.length);
    const auto n_out = static_cast<std::size_t>(nn), k_in = static_cast<std::size_t>(kk);
    ref::linear_backward_dw<S>(p.layout, m, n_out, k_in, dy.data.data(), x.data.data(), out);
    ref::magnitude_backward_dw<S>(p.layout, m, n_out, k_in, dy.data.data(), x.data.data(),
                                  e.mag.data());
    e.k_ref = p.M;
  }
  return e;
}

// The reference in the case's f32 / f64 (T) itself.
template <class T>
expectation expect(const par::run_case& c, tensor t, const block& b, par::index_run inner) {
  return expect_from<T>(c, t, b, inner, [&](tensor u, const auto& rows, const auto& cols) {
    return generate<T>(c, u, rows, cols);
  });
}

// The chains of a stack's layers as stack_expect reads them, with their reductions' shares.
ref::stack_chains stack_chains_of(std::span<const par::chain_lengths> layer_chains) {
  ref::stack_chains chains;
  for (const par::chain_lengths& l : layer_chains) {
    chains.h.push_back(l.y);
    chains.da.push_back(l.dx);
    chains.dw.push_back(l.dw);
    chains.h_red.push_back(l.reduced.y);
    chains.da_red.push_back(l.reduced.dx);
    chains.dw_red.push_back(l.reduced.dw);
  }
  return chains;
}

template <class T>
matrix<float> widened(const matrix<T>& m);

// The whole reference of a stack stored in bf16 / f16 (T), in f32 on the widened inputs, its
// hidden tensors stored in T as the kernel stores them (stack.hpp stack_storage), with the
// bound of the case's policy per element and, at λ > 0, the statistical tier's.
template <class T>
ref::stack_expectation<float> expect_whole_stack16(const par::run_case& c,
                                                   std::span<const par::chain_lengths> layer_chains,
                                                   double lambda) {
  const auto& p = c.prob;
  const ref::stack_shape shape{p.layout, p.widths(), p.act};
  const auto x = widened(generate<T>(c, {tensor::x, 0}, 0, p.M, 0, p.K));
  const auto dy = widened(generate<T>(c, {tensor::dy, 0}, 0, p.M, 0, p.N));
  std::vector<matrix<float>> ws;
  std::vector<const float*> w_ptrs;
  for (std::size_t l = 0; l < shape.layers(); ++l) {
    const bool out_in = p.layout == weight_layout::out_in;
    const auto out = static_cast<std::int64_t>(shape.width(l + 1));
    const auto in = static_cast<std::int64_t>(shape.width(l));
    ws.push_back(
        widened(generate<T>(c, {tensor::w, l}, 0, out_in ? out : in, 0, out_in ? in : out)));
  }
  for (const auto& w : ws) w_ptrs.push_back(w.data.data());
  const ref::stack_chains chains = stack_chains_of(layer_chains);
  const ref::stack_storage storage{p.type, c.policy};
  const float none{};
  const float* dy_ptr = dy.data.empty() ? &none : dy.data.data();
  const auto rows = static_cast<std::size_t>(p.M);
  ref::stack_expectation<float> e = ref::stack_expect<float>(
      shape, rows, x.data.data(), w_ptrs, dy_ptr, chains, dtype::f32, 0, &storage);
  if (lambda > 0) {
    ref::stack_expectation<float> st = ref::stack_expect<float>(
        shape, rows, x.data.data(), w_ptrs, dy_ptr, chains, dtype::f32, lambda, &storage);
    e.y_stat_bound = std::move(st.y_bound);
    e.dx_stat_bound = std::move(st.dx_bound);
    e.dw_stat_bound = std::move(st.dw_bound);
  }
  return e;
}

// The reference of a whole stack (L > 1) — every row of X and dY, so every output — and, per
// element, its bound (stack.hpp) for the strategy's chains per layer. Y's and dX's rows are
// independent, so the blocks of a rank's outputs are all slices of it: computed once per case
// and rank, whatever the number of layers.
template <class T>
ref::stack_expectation<T> expect_whole_stack(const par::run_case& c,
                                             std::span<const par::chain_lengths> layer_chains,
                                             double lambda) {
  const auto& p = c.prob;
  const ref::stack_shape shape{p.layout, p.widths(), p.act};
  const auto x = generate<T>(c, {tensor::x, 0}, 0, p.M, 0, p.K);
  const auto dy = generate<T>(c, {tensor::dy, 0}, 0, p.M, 0, p.N);
  std::vector<matrix<T>> ws;
  std::vector<const T*> w_ptrs;
  for (std::size_t l = 0; l < shape.layers(); ++l) {
    const bool out_in = p.layout == weight_layout::out_in;
    const auto out = static_cast<std::int64_t>(shape.width(l + 1));
    const auto in = static_cast<std::int64_t>(shape.width(l));
    ws.push_back(generate<T>(c, {tensor::w, l}, 0, out_in ? out : in, 0, out_in ? in : out));
  }
  for (const auto& w : ws) w_ptrs.push_back(w.data.data());
  ref::stack_chains chains = stack_chains_of(layer_chains);
  // stack_expect reads a null dY as "forward only": an empty dY (no rows or N = 0) is not null.
  const T none{};
  const T* dy_ptr = dy.data.empty() ? &none : dy.data.data();
  ref::stack_expectation<T> e = ref::stack_expect<T>(shape, static_cast<std::size_t>(p.M),
                                                     x.data.data(), w_ptrs, dy_ptr, chains, p.type);
  if (lambda > 0) {
    // The statistical tier's bounds: the same induction with γ̃ (stack.hpp).
    ref::stack_expectation<T> st =
        ref::stack_expect<T>(shape, static_cast<std::size_t>(p.M), x.data.data(), w_ptrs, dy_ptr,
                             chains, p.type, lambda);
    e.y_stat_bound = std::move(st.y_bound);
    e.dx_stat_bound = std::move(st.dx_bound);
    e.dw_stat_bound = std::move(st.dw_bound);
  }
  return e;
}

// Block b of stack output t, sliced from the whole stack's reference.
template <class T>
expectation expect_stack(const par::run_case& c, tensor_slot t, const block& b,
                         const ref::stack_expectation<T>& all) {
  const auto& p = c.prob;
  const std::vector<T>& value = t.t == tensor::y    ? all.y
                                : t.t == tensor::dx ? all.dx
                                                    : all.dw[t.layer];
  const std::vector<double>& bound = t.t == tensor::y    ? all.y_bound
                                     : t.t == tensor::dx ? all.dx_bound
                                                         : all.dw_bound[t.layer];
  const std::vector<double>& mag = t.t == tensor::y    ? all.y_mag
                                   : t.t == tensor::dx ? all.dx_mag
                                                       : all.dw_mag[t.layer];
  const bool stat = !all.y_stat_bound.empty() || !all.dw_stat_bound.empty();  // M = 0: no Y
  const std::vector<double>& stat_bound = !stat               ? all.y_stat_bound
                                          : t.t == tensor::y  ? all.y_stat_bound
                                          : t.t == tensor::dx ? all.dx_stat_bound
                                                              : all.dw_stat_bound[t.layer];
  const auto full_cols = static_cast<std::size_t>(par::dim_length(p, par::dim_names(t, p).second));
  const auto br = static_cast<std::size_t>(b.rows), bc = static_cast<std::size_t>(b.cols);
  expectation e;
  e.value = par::make_matrix<T>(br, bc);
  e.mag.assign(br * bc, 0.0);
  e.stack_mag.assign(br * bc, 0.0);
  if (stat) e.stat_bound.assign(br * bc, 0.0);
  T* out = std::get<matrix<T>>(e.value).data.data();
  const auto b_rows = par::runs_of_rows(b), b_cols = par::runs_of_cols(b);
  for (std::size_t i = 0; i < br; ++i)
    for (std::size_t j = 0; j < bc; ++j) {
      const auto gi = par::global_index(b_rows, static_cast<std::int64_t>(i));
      const auto gj = par::global_index(b_cols, static_cast<std::int64_t>(j));
      const std::size_t at =
          static_cast<std::size_t>(gi) * full_cols + static_cast<std::size_t>(gj);
      out[i * bc + j] = value[at];
      e.mag[i * bc + j] = bound[at];
      e.stack_mag[i * bc + j] = mag[at];
      if (stat) e.stat_bound[i * bc + j] = stat_bound[at];
    }
  return e;
}

// A stack's whole reference, computed the first time one of a rank's blocks needs it, with what
// it took: per layer 3 GEMMs of 2·M·d_{l−1}·d_l flops and their bounds' as many; X, dY and every
// W_l generated.
struct stack_reference {
  std::variant<std::monostate, ref::stack_expectation<float>, ref::stack_expectation<double>> all;
  std::int64_t flops = 0, panel_bytes = 0;
  template <class T>
  const ref::stack_expectation<T>& get(const par::run_case& c,
                                       std::span<const par::chain_lengths> chains, double lambda) {
    if (!std::holds_alternative<ref::stack_expectation<T>>(all)) {
      all = expect_whole_stack<T>(c, chains, lambda);
      count<T>(c);
    }
    return std::get<ref::stack_expectation<T>>(all);
  }
  // A bf16 / f16 stack's (T16), in f32.
  template <class T16>
  const ref::stack_expectation<float>& get16(const par::run_case& c,
                                             std::span<const par::chain_lengths> chains,
                                             double lambda) {
    if (!std::holds_alternative<ref::stack_expectation<float>>(all)) {
      all = expect_whole_stack16<T16>(c, chains, lambda);
      count<float>(c);
    }
    return std::get<ref::stack_expectation<float>>(all);
  }

 private:
  template <class T>
  void count(const par::run_case& c) {
    const auto& p = c.prob;
    const std::vector<std::int64_t> d = p.widths();
    std::int64_t weights = 0;
    for (std::size_t l = 1; l < d.size(); ++l)
      weights = checked_add(weights, checked_mul(d[l], d[l - 1], "check flops"), "check flops");
    flops = checked_mul(checked_mul(weights, p.M, "check flops"), 12, "check flops");
    panel_bytes =
        checked_mul(checked_add(checked_mul(p.M, p.K + p.N, "check bytes"), weights, "check bytes"),
                    static_cast<std::int64_t>(sizeof(T)), "check bytes");
  }
};

std::int64_t chain_of(const par::chain_lengths& l, tensor t) {
  return t == tensor::y ? l.y : t == tensor::dx ? l.dx : l.dw;
}

std::string where(const std::string& t, const block& b, int rank, const std::vector<int>& coords,
                  std::size_t li, std::size_t lj) {
  std::ostringstream os;
  os << t << "[i=" << par::global_index(par::runs_of_rows(b), static_cast<std::int64_t>(li))
     << ", j=" << par::global_index(par::runs_of_cols(b), static_cast<std::int64_t>(lj))
     << "] on rank " << rank;
  if (coords.size() > 1) {
    os << " (coords";
    for (int v : coords) os << ' ' << v;
    os << ')';
  }
  os << " at local (" << li << ", " << lj << ")";
  return os.str();
}

// The chains of case c's layers, or zeros when the kernel claims none (then only exact mode, which
// is bitwise and needs no chain, is judged).
std::vector<par::chain_lengths> chains_or_zero(const par::claims& cl, const par::run_case& c) {
  if (cl.chains) return *cl.chains;
  return std::vector<par::chain_lengths>(c.prob.layers());
}

// The statistical tier of case c (statistical_events; u the storage dtype's). λ = 0 (off): exact
// mode (bitwise) or no chains claimed.
statistical_tier statistical_tier_of(const par::run_case& c,
                                     std::span<const par::chain_lengths> chains, bool forward,
                                     bool backward, bool claimed) {
  if (c.mode == value_mode::exact || !claimed || chains.empty()) return {};
  const double events = statistical_events(c, chains, forward, backward);
  const double u = ref::unit_roundoff(c.prob.type);
  statistical_tier st;
  st.lambda = ref::lambda_for(events, ref::statistical_p_fail, u);
  st.p_fail = ref::false_alarm(events, st.lambda, u);
  return st;
}

// "Y on rank 1 is 3×4, its placement says 3×5", or empty where the block has its shape.
std::string shape_mismatch(const par::tensor_plan& t, std::size_t rows, std::size_t cols,
                           int rank) {
  const block& b = t.region;
  if (static_cast<std::int64_t>(rows) == b.rows && static_cast<std::int64_t>(cols) == b.cols)
    return {};
  std::ostringstream os;
  os << t.name << " on rank " << rank << " is " << rows << "×" << cols << ", its placement says "
     << b.rows << "×" << b.cols;
  return os.str();
}

// Judges output t on this rank; returns an empty string when it passes. Updates the error
// figures (and worst_error, their largest err/u·mag).
template <class T>
std::string judge(const par::run_case& c, const par::tensor_plan& t, const any_matrix& got_any,
                  std::span<const par::chain_lengths> chains, stack_reference& whole, int rank,
                  const std::vector<int>& coords, const statistical_tier& tier, verdict& v,
                  expectation& single) {
  const auto& got = std::get<matrix<T>>(got_any);
  const block& b = t.region;
  if (std::string bad = shape_mismatch(t, got.rows, got.cols, rank); !bad.empty()) return bad;
  if (b.rows == 0 || b.cols == 0) return {};  // nothing here (e.g. another stage's tensor)
  const bool stack = c.prob.layers() > 1;
  const expectation e = stack ? expect_stack<T>(c, t.slot, b, whole.get<T>(c, chains, tier.lambda))
                              : std::move(single);
  const auto& want = std::get<matrix<T>>(e.value);
  const auto rows = got.rows, cols = got.cols;
  ref::compare_options opt;
  opt.bitwise = c.mode == value_mode::exact;
  opt.mag_is_bound = stack;
  opt.k_par = stack ? 0 : chain_of(chains.front(), t.slot.t);
  opt.k_ref = e.k_ref;
  opt.k_mag = e.k_ref;
  opt.lambda = stack ? 0 : tier.lambda;
  opt.stat_bound = stack && !e.stat_bound.empty() ? e.stat_bound.data() : nullptr;
  const double u = ref::unit_roundoff(c.prob.type);
  // The figures: error in u·mag, and the share of each tier's bound used.
  error_cell& cell = v.errors.at(c.prob.type, t.slot.t, c.mode);
  const auto share = [](double err, double bound) {
    return err == 0 ? 0.0 : bound > 0 ? err / bound : INFINITY;
  };
  // Each tier's bound per unit of mag, once per block (element_bound is this times mag, but for
  // the last rounding: good enough for a share).
  const double per_mag_rig =
      stack ? 0 : ref::element_bound(1.0, opt.k_par, opt.k_ref, c.prob.type, opt.k_mag);
  const double per_mag_stat =
      stack || tier.lambda <= 0
          ? 0
          : ref::element_bound(1.0, opt.k_par, opt.k_ref, c.prob.type, opt.k_mag, tier.lambda);
  for (std::size_t i = 0; i < rows * cols; ++i) {
    const double g = got.data[i], w = want.data[i];
    if (!std::isfinite(g) || !std::isfinite(w)) continue;
    const double err = std::abs(g - w);
    const double mag = stack ? e.stack_mag[i] : e.mag[i];
    if (mag > 0) cell.err_u_mag = std::max(cell.err_u_mag, err / (u * mag));
    if (opt.bitwise) continue;
    const double rigorous = stack ? e.mag[i] : per_mag_rig * e.mag[i];
    cell.rigorous = std::max(cell.rigorous, share(err, rigorous));
    if (tier.lambda <= 0 || (stack && e.stat_bound.empty())) continue;
    const double stat = stack ? e.stat_bound[i] : per_mag_stat * e.mag[i];
    cell.statistical = std::max(cell.statistical, share(err, stat));
  }
  v.worst_error = std::max(v.worst_error, cell.err_u_mag);
  const auto bad = ref::compare_block<T>(rows, cols, got.data.data(), cols, want.data.data(), cols,
                                         e.mag.data(), cols, opt);
  if (!bad) return {};
  std::ostringstream os;
  os.precision(17);
  os << where(t.name, b, rank, coords, bad->row, bad->col) << ": got " << bad->got << ", expected "
     << bad->expected;
  if (opt.bitwise) {
    os << " (exact mode: bitwise equality required)";
  } else if (bad->reason == "statistical") {
    os.precision(3);
    os << ", statistical bound " << bad->bound << " (λ=" << tier.lambda;
    if (!stack) os << ", k_par=" << opt.k_par << ", k_ref=" << opt.k_ref;
    os << "), error = " << bad->ratio << "·bound; within the rigorous bound, above the "
       << "statistical one, which a correct kernel exceeds on a case with probability ≤ "
       << tier.p_fail << " (independent mean-zero rounding errors)";
  } else if (stack) {
    os << ", stack bound " << bad->bound << ", error = " << bad->ratio << "·bound";
  } else {
    os << ", bound " << bad->bound << " (k_par=" << opt.k_par << ", k_ref=" << opt.k_ref
       << "), error = " << bad->ratio << "·u·mag";
  }
  if (!bad->reason.empty()) os << " [" << bad->reason << "]";
  return os.str();
}

// --- 16-bit storage (reference/mixed.hpp): the reference in f32 on widened inputs, judged by the
// window around its f32 value ------------------------------------------------------------------

template <class T>
matrix<float> widened(const matrix<T>& m) {
  matrix<float> out(m.rows, m.cols);
  ref::widen<T>(m.data.data(), m.data.size(), out.data.data());
  return out;
}

// The f32 value b (before rounding to T) of block b of output t, and its magnitude product, from
// the inputs generated in T and widened (products exact in f32), summed on OpenBLAS's sgemm.
template <class T>
expectation expect_widened(const par::run_case& c, tensor t, const block& b) {
  return expect_from<float>(c, t, b, {0, inner_of(c.prob, t)},
                            [&](tensor u, const auto& rows, const auto& cols) {
                              return widened(generate<T>(c, u, rows, cols));
                            });
}

std::int64_t reduced_of(const par::chain_lengths& l, tensor t) {
  return t == tensor::y ? l.reduced.y : t == tensor::dx ? l.reduced.dx : l.reduced.dw;
}

// The rounding events of a bf16 / f16 case for the statistical tier's union bound: every
// element of every output, once (a replica is the same computation), × its two chains (this
// kernel's and the reference's). Y (M×N): k_y + K; dX (M×K): k_dx + N; dW (N×K): k_dw + M.
double mixed_events(const par::run_case& c, std::span<const par::chain_lengths> chains) {
  const auto& p = c.prob;
  const auto d = [](std::int64_t v) { return static_cast<double>(v); };
  const par::chain_lengths& l = chains.front();
  return d(p.M) * d(p.N) * d(l.y + p.K) + d(p.M) * d(p.K) * d(l.dx + p.N) +
         d(p.N) * d(p.K) * d(l.dw + p.M);
}

}  // namespace

statistical_tier mixed_stack_tier(const par::run_case& c,
                                  std::span<const par::chain_lengths> chains, bool forward,
                                  bool backward) {
  if (c.mode == value_mode::exact || chains.empty()) return {};
  const double events = statistical_events(c, chains, forward, backward);
  const double u_max =
      std::max(ref::unit_roundoff(c.policy.acc), ref::unit_roundoff(c.policy.reduce));
  statistical_tier st;
  st.lambda = ref::lambda_for(events, ref::statistical_p_fail, u_max);
  st.p_fail = ref::false_alarm(events, st.lambda, u_max);
  return st;
}

ref::stack_expectation<float> mixed_stack_reference(const par::run_case& c,
                                                    std::span<const par::chain_lengths> chains,
                                                    double lambda) {
  if (c.prob.type == dtype::bf16) return expect_whole_stack16<bfloat16_t>(c, chains, lambda);
  if (c.prob.type == dtype::f16) return expect_whole_stack16<half_t>(c, chains, lambda);
  throw error("mixed_stack_reference: the case is not stored in bf16 / f16");
}

mixed_windows mixed_windows_of(const par::run_case& c, std::span<const par::chain_lengths> chains,
                               tensor t) {
  mixed_windows w;
  const std::int64_t k_ref = inner_of(c.prob, t);
  w.k_par = chain_of(chains.front(), t);
  w.k_red = std::min(reduced_of(chains.front(), t), w.k_par);
  w.rigorous = ref::policy_factor(w.k_par - w.k_red, w.k_red, c.prob.type, c.policy) +
               ref::gamma(k_ref, dtype::f32);
  if (c.mode == value_mode::exact) return w;
  // The statistical tier (bound.hpp): the same window with γ̃_k(λ) for every chain, λ from the
  // case's rounding events (every output element of the case × both chains) so that a correct
  // kernel trips it on a case with probability at most ref::statistical_p_fail.
  w.events = mixed_events(c, chains);
  const double u_max =
      std::max(ref::unit_roundoff(c.policy.acc), ref::unit_roundoff(c.policy.reduce));
  w.lambda = ref::lambda_for(w.events, ref::statistical_p_fail, u_max);
  w.statistical =
      ref::policy_factor_statistical(w.k_par - w.k_red, w.k_red, c.prob.type, c.policy, w.lambda) +
      ref::gamma_tilde(k_ref, ref::unit_roundoff(dtype::f32), w.lambda);
  return w;
}

namespace {

// Judges output t of a bf16 / f16 case (a single layer): got within the window of its policy's
// chains around the reference's f32 value (bitwise round(b) in exact mode), then within the
// statistical tier's narrower window ("[statistical]" in the message). The figures (v.errors,
// in the storage dtype's row): |got − b| / (u·mag), u the storage dtype's, and the share of each
// tier's window used (ref::window_share; > 1 is outside it).
template <class T>
std::string judge_mixed(const par::run_case& c, const par::tensor_plan& t,
                        const any_matrix& got_any, std::span<const par::chain_lengths> chains,
                        int rank, const std::vector<int>& coords, verdict& v) {
  const auto& got = std::get<matrix<T>>(got_any);
  const block& b = t.region;
  if (std::string bad = shape_mismatch(t, got.rows, got.cols, rank); !bad.empty()) return bad;
  if (b.rows == 0 || b.cols == 0) return {};
  const expectation e = expect_widened<T>(c, t.slot.t, b);
  const auto& want = std::get<matrix<float>>(e.value);
  const mixed_windows mw = mixed_windows_of(c, chains, t.slot.t);
  const std::int64_t k_par = mw.k_par, k_red = mw.k_red;
  const double u = ref::unit_roundoff(c.prob.type);
  const bool bitwise = c.mode == value_mode::exact;
  const double events = mw.events, lambda = mw.lambda, f_rigorous = mw.rigorous,
               f_tilde = mw.statistical;
  error_cell& cell = v.errors.at(c.prob.type, t.slot.t, c.mode);
  for (std::size_t i = 0; i < got.data.size(); ++i) {
    const double g = static_cast<float>(got.data[i]), w = want.data[i];
    if (!std::isfinite(g) || !std::isfinite(w)) continue;
    if (e.mag[i] > 0) cell.err_u_mag = std::max(cell.err_u_mag, std::abs(g - w) / (u * e.mag[i]));
    if (bitwise) continue;
    cell.rigorous = std::max(cell.rigorous, ref::window_share<T>(got.data[i], want.data[i],
                                                                 e.mag[i], f_rigorous, e.k_ref));
    cell.statistical = std::max(cell.statistical, ref::window_share<T>(got.data[i], want.data[i],
                                                                       e.mag[i], f_tilde, e.k_ref));
  }
  v.worst_error = std::max(v.worst_error, cell.err_u_mag);
  auto bad =
      ref::compare_window<T>(got.rows, got.cols, got.data.data(), got.cols, want.data.data(),
                             want.cols, e.mag.data(), want.cols, f_rigorous, e.k_ref, bitwise);
  const bool statistical = !bad && !bitwise;
  if (statistical) {
    bad = ref::compare_window<T>(got.rows, got.cols, got.data.data(), got.cols, want.data.data(),
                                 want.cols, e.mag.data(), want.cols, f_tilde, e.k_ref, false);
    if (bad && bad->reason == "window") bad->reason = "statistical";
  }
  if (!bad) return {};
  std::ostringstream os;
  os.precision(17);
  os << where(t.name, b, rank, coords, bad->row, bad->col) << ": got " << bad->got << ", expected "
     << bad->expected << " (the f32 reference " << want.data[bad->row * want.cols + bad->col]
     << " rounded to " << to_string(c.prob.type) << ")";
  if (bitwise)
    os << " (exact mode: bitwise equality required)";
  else
    os << ", " << (statistical ? "statistical " : "") << "window ±" << bad->bound
       << " around the f32 reference (" << to_string(c.policy) << ", k_par=" << k_par
       << " of which reduced " << k_red << ", k_ref=" << e.k_ref << "), error = " << bad->ratio
       << "·u·mag";
  if (statistical) {
    const double err = std::abs(bad->got - want.data[bad->row * want.cols + bad->col]);
    os << " = " << (bad->bound > 0 ? err / bad->bound : INFINITY) << "·bound (λ = " << lambda
       << ", false-alarm probability " << ref::false_alarm(events, lambda, 0x1p-24) << ")";
  }
  if (!bad->reason.empty()) os << " [" << bad->reason << "]";
  return os.str();
}

// Judges output t of a bf16 / f16 stack: got within the window of its own element's bound
// (stack.hpp, the case's policy, hidden tensors stored in the storage dtype) around the f32
// reference (bitwise round(b) in exact mode), then within the statistical tier's.
template <class T>
std::string judge_mixed_stack(const par::run_case& c, const par::tensor_plan& t,
                              const any_matrix& got_any, const ref::stack_expectation<float>& all,
                              double lambda, double p_fail, int rank,
                              const std::vector<int>& coords, verdict& v) {
  const auto& got = std::get<matrix<T>>(got_any);
  const block& b = t.region;
  if (std::string bad = shape_mismatch(t, got.rows, got.cols, rank); !bad.empty()) return bad;
  if (b.rows == 0 || b.cols == 0) return {};
  const expectation e = expect_stack<float>(c, t.slot, b, all);  // mag: the bound itself
  const auto& want = std::get<matrix<float>>(e.value);
  const double u = ref::unit_roundoff(c.prob.type);
  const bool bitwise = c.mode == value_mode::exact;
  // The figures as judge_mixed's: err/u·mag, and the share of each tier's window (e.mag is the
  // rigorous bound itself, e.stat_bound the statistical one: δ = 1·bound, no inflation).
  error_cell& cell = v.errors.at(c.prob.type, t.slot.t, c.mode);
  for (std::size_t i = 0; i < got.data.size(); ++i) {
    const double g = static_cast<float>(got.data[i]), w = want.data[i];
    if (!std::isfinite(g) || !std::isfinite(w)) continue;
    if (e.stack_mag[i] > 0)
      cell.err_u_mag = std::max(cell.err_u_mag, std::abs(g - w) / (u * e.stack_mag[i]));
    if (bitwise) continue;
    cell.rigorous =
        std::max(cell.rigorous, ref::window_share<T>(got.data[i], want.data[i], e.mag[i], 1.0, 0));
    if (!e.stat_bound.empty())
      cell.statistical = std::max(cell.statistical, ref::window_share<T>(got.data[i], want.data[i],
                                                                         e.stat_bound[i], 1.0, 0));
  }
  v.worst_error = std::max(v.worst_error, cell.err_u_mag);
  auto bad = ref::compare_window<T>(got.rows, got.cols, got.data.data(), got.cols, want.data.data(),
                                    want.cols, e.mag.data(), want.cols, 1.0, 0, bitwise);
  const bool statistical = !bad && !bitwise && lambda > 0 && !e.stat_bound.empty();
  if (statistical) {
    bad = ref::compare_window<T>(got.rows, got.cols, got.data.data(), got.cols, want.data.data(),
                                 want.cols, e.stat_bound.data(), want.cols, 1.0, 0, false);
    if (bad && bad->reason == "window") bad->reason = "statistical";
  }
  if (!bad) return {};
  std::ostringstream os;
  os.precision(17);
  const float b_ref = want.data[bad->row * want.cols + bad->col];
  os << where(t.name, b, rank, coords, bad->row, bad->col) << ": got " << bad->got << ", expected "
     << bad->expected << " (the f32 reference " << b_ref << " rounded to " << to_string(c.prob.type)
     << ")";
  if (bitwise) {
    os << " (exact mode: bitwise equality required)";
  } else {
    const double err = std::abs(bad->got - static_cast<double>(b_ref));
    os.precision(3);
    os << ", " << (statistical ? "statistical " : "") << "stack window ±" << bad->bound
       << " around the f32 reference (" << to_string(c.policy) << ", hidden tensors stored in "
       << to_string(c.prob.type) << "), error = " << (bad->bound > 0 ? err / bad->bound : INFINITY)
       << "·bound";
    if (statistical) os << " (λ = " << lambda << ", false-alarm probability " << p_fail << ")";
  }
  if (!bad->reason.empty()) os << " [" << bad->reason << "]";
  return os.str();
}

struct run_result {
  any_matrix y, dx;
  std::vector<any_matrix> dws;  // dW_1 … dW_L
  std::vector<par::ledger_entry> log;
  std::int64_t peak_forward = 0, peak_backward = 0;
  std::int64_t mpi_peak = 0;  // MPI's own heap inside the kernel's calls, either phase (apart)
  [[nodiscard]] const any_matrix& out(tensor_slot t) const {
    return t.t == tensor::y ? y : t.t == tensor::dx ? dx : dws.at(t.layer);
  }
};

// The mesh's communicators as a recording window tracks them: the whole mesh as axis −1, each
// axis as itself.
std::vector<par::pmpi::tracked_comm> raw_comms(par::mesh& grid) {
  std::vector<par::pmpi::tracked_comm> out{{grid.all().native_handle(), -1}};
  for (int a = 0; a < static_cast<int>(grid.dims().size()); ++a)
    out.push_back({grid.axis(a).native_handle(), a});
  return out;
}

// Runs forward and backward once, measuring each phase's peak. The ledger is sized for what the
// kernel claims before the measured scopes open, so recording allocates nothing in them. The
// kernel's raw MPI calls on the mesh's communicators are recorded into the same ledger (pmpi.hpp).
run_result run_once(const par::kernel& k, const par::run_case& c, par::mesh& grid,
                    const rank_inputs& in, const par::claims& cl,
                    par::pmpi::interceptor* hook = nullptr) {
  run_result r;
  r.dws.resize(in.ws.size());
  par::ledger log;
  if (cl.collectives) log.reserve(cl.collectives->forward.size() + cl.collectives->backward.size());
  grid.attach(&log, true);
  const par::pmpi::recording raw(log, true, raw_comms(grid), hook);
  par::context ctx{grid};
  log.set_phase(par::phase::forward);
  {
    mem::peak_scope scope;
    k.forward(ctx, c, par::forward_io{in.x, in.ws, r.y});
    r.peak_forward = static_cast<std::int64_t>(scope.peak());
    r.mpi_peak = static_cast<std::int64_t>(scope.mpi_peak());
  }
  log.set_phase(par::phase::backward);
  {
    mem::peak_scope scope;
    k.backward(ctx, c, par::backward_io{in.x, in.ws, in.dy, r.dx, r.dws});
    r.peak_backward = static_cast<std::int64_t>(scope.peak());
    r.mpi_peak = std::max(r.mpi_peak, static_cast<std::int64_t>(scope.mpi_peak()));
  }
  grid.attach(nullptr, false);
  r.log = log.entries();
  return r;
}

std::string compare_ledger(const std::vector<par::ledger_entry>& got,
                           const par::claims::collective_claim& claim, int rank) {
  std::vector<par::ledger_entry> want;
  for (auto [when, list] : {std::pair{par::phase::forward, &claim.forward},
                            std::pair{par::phase::backward, &claim.backward}})
    for (par::ledger_entry e : *list) {
      e.when = when;
      want.push_back(e);
    }
  const std::size_t n = std::max(got.size(), want.size());
  for (std::size_t i = 0; i < n; ++i) {
    if (i < got.size() && i < want.size() && got[i] == want[i]) continue;
    std::ostringstream os;
    os << "rank " << rank << ", collective #" << i << ": recorded "
       << (i < got.size() ? par::to_string(got[i]) : "nothing") << "; cost model says "
       << (i < want.size() ? par::to_string(want[i]) : "nothing") << " (" << got.size()
       << " recorded, " << want.size() << " predicted)";
    return os.str();
  }
  return {};
}

std::uint64_t hash_bits(const any_matrix& m) {
  return std::visit(
      [](const auto& v) {
        std::uint64_t h = 1469598103934665603ull ^ (v.rows * 0x9e3779b97f4a7c15ull) ^ v.cols;
        const auto* bytes = reinterpret_cast<const unsigned char*>(v.data.data());
        for (std::size_t i = 0; i < v.data.size() * sizeof(v.data[0]); ++i)
          h = (h ^ bytes[i]) * 1099511628211ull;
        return h;
      },
      m);
}

// First local index at which a and b differ bitwise, or -1.
std::int64_t first_difference(const any_matrix& a, const any_matrix& b) {
  if (a.index() != b.index() || par::rows_of(a) != par::rows_of(b) ||
      par::cols_of(a) != par::cols_of(b))
    return 0;
  return std::visit(
      [&](const auto& va) -> std::int64_t {
        const auto& vb = std::get<std::decay_t<decltype(va)>>(b);
        for (std::size_t i = 0; i < va.data.size(); ++i)
          if (std::memcmp(&va.data[i], &vb.data[i], sizeof(va.data[i])) != 0)
            return static_cast<std::int64_t>(i);
        return -1;
      },
      a);
}

// One case on one rank: what every property reads, and the verdict they write.
struct case_run {
  const subject& s;
  const par::run_case& c;
  unsigned mask;
  int rank = 0;
  verdict v;
  par::pmpi::interceptor* hook = nullptr;  // a mutant's, on the kernel's raw MPI calls

  [[nodiscard]] bool on(property p) const { return (mask & static_cast<unsigned>(p)) != 0; }
  void fail(property p, const std::string& msg) {
    const auto bit = static_cast<unsigned>(p);
    if ((v.failed & bit) != 0) return;
    v.failed |= bit;
    if (v.message.empty()) v.message = std::string(to_string(p)) + ": " + msg;
  }
  void not_claimed(property p) { v.not_claimed |= static_cast<unsigned>(p); }
  void not_measured(property p) { v.not_measured |= static_cast<unsigned>(p); }
};

// A block's description, the same on every rank that holds it (tiled runs folded in).
std::uint64_t runs_key(const std::vector<par::index_run>& runs);
// takes part, the block's description (3), tiled or not, its first row, its column count
constexpr std::size_t share_fields = 7;
void describe_block(const block& b, bool takes_part, std::uint64_t* out) {
  out[0] = takes_part ? 1 : 0;
  out[1] = static_cast<std::uint64_t>(b.row0) ^ runs_key(b.row_runs);
  out[2] = static_cast<std::uint64_t>(b.rows);
  out[3] = (static_cast<std::uint64_t>(b.col0) << 32 | static_cast<std::uint64_t>(b.cols)) ^
           runs_key(b.col_runs);
  out[4] = b.row_runs.empty() && b.col_runs.empty() ? 0 : 1;
  out[5] = static_cast<std::uint64_t>(b.row0);
  out[6] = static_cast<std::uint64_t>(b.cols);
}

// How this rank's block of one output shares its reference with other ranks, from every rank's
// description (the same decision on every rank):
// - replicas: r ranks hold the same block; the q-th computes the products over the q-th r-th of
//   the inner dimension and the parts are summed across them;
// - tiles: g ranks hold blocks of the same columns, each on one rank, whose rows together are
//   one run [lo, lo + rows): the q-th computes the whole run's products over the q-th g-th of
//   the inner dimension, and a reduce-scatter gives each its own rows summed — when that holds
//   less than computing its own block over the whole inner dimension. sharded_weights on p = 4,
//   M = 4·m: dW (N/4 rows × K on each rank, inner M) costs each rank m rows of dY and X instead
//   of M, for N × K of partial sums.
// - alone: the block, whole, on this rank.
struct share {
  bool split = false;  // some group of this output has more than one rank: split case_comm
  int color = MPI_UNDEFINED, key = 0;
  int parts = 1, part = 0;  // the inner dimension in `parts`, this rank's the `part`-th
  bool tiles = false;
  std::int64_t lo = 0, rows = 0;  // tiles: the rows computed together
  std::vector<int> counts;        // tiles: each member's elements, in row order
};
share share_of(const std::vector<std::uint64_t>& all, std::size_t i, std::size_t outputs, int p,
               int me, std::int64_t inner) {
  share s;
  const auto at = [&](int j) {
    return all.data() + (static_cast<std::size_t>(j) * outputs + i) * share_fields;
  };
  const auto same = [&](int j, int k) { return std::equal(at(j) + 1, at(j) + 4, at(k) + 1); };
  std::vector<int> holders(static_cast<std::size_t>(p), 0);
  for (int j = 0; j < p; ++j)
    for (int k = 0; k < p && at(j)[0] == 1; ++k)
      if (at(k)[0] == 1 && same(j, k)) ++holders[static_cast<std::size_t>(j)];
  for (int j = 0; j < p; ++j) {
    if (holders[static_cast<std::size_t>(j)] <= 1) continue;
    s.split = true;
    if (at(me)[0] == 1 && same(j, me)) {
      if (s.color == MPI_UNDEFINED) s.color = j;
      if (j < me) ++s.part;
      s.parts = holders[static_cast<std::size_t>(me)];
    }
  }
  // Tiles: untiled blocks on one rank each, grouped by their columns, in row order.
  const auto tile = [&](int j) {
    return at(j)[0] == 1 && at(j)[4] == 0 && holders[static_cast<std::size_t>(j)] == 1;
  };
  for (int j = 0; j < p; ++j) {
    if (!tile(j)) continue;
    bool first = true;
    for (int k = 0; k < j && first; ++k) first = !(tile(k) && at(k)[3] == at(j)[3]);
    if (!first) continue;
    std::vector<int> members;
    for (int k = j; k < p; ++k)
      if (tile(k) && at(k)[3] == at(j)[3]) members.push_back(k);
    if (members.size() < 2) continue;
    std::sort(members.begin(), members.end(), [&](int a, int b) { return at(a)[5] < at(b)[5]; });
    const auto g = static_cast<std::int64_t>(members.size());
    const auto cols = static_cast<std::int64_t>(at(j)[6]);
    std::int64_t next = static_cast<std::int64_t>(at(members[0])[5]), own_most = 0;
    bool run = true;
    for (int k : members) {
      const auto r0 = static_cast<std::int64_t>(at(k)[5]), rs = static_cast<std::int64_t>(at(k)[2]);
      run = run && r0 == next;
      next = r0 + rs;
      own_most = std::max(own_most, (rs + cols) * inner + 2 * rs * cols);
    }
    const std::int64_t lo = static_cast<std::int64_t>(at(members[0])[5]), rows = next - lo;
    const std::int64_t together = (rows + cols) * ((inner + g - 1) / g) + 2 * rows * cols;
    if (!run || together > own_most || rows > INT_MAX / std::max<std::int64_t>(cols, 1)) continue;
    s.split = true;
    const auto mine = std::find(members.begin(), members.end(), me);
    if (mine == members.end()) continue;
    s.color = p + j;
    s.key = static_cast<int>(mine - members.begin());
    s.parts = static_cast<int>(g);
    s.part = s.key;
    s.tiles = true;
    s.lo = lo;
    s.rows = rows;
    for (int k : members) s.counts.push_back(static_cast<int>(at(k)[2] * cols));
  }
  if (!s.tiles) s.key = me;
  return s;
}

// Each member's rows of `whole` (rows × cols, row-major, members in row order), summed across
// them, into `own`.
template <class V>
void sum_scattered(const V* whole, V* own, const std::vector<int>& counts, MPI_Comm group) {
  const MPI_Datatype type = std::is_same_v<V, float> ? MPI_FLOAT : MPI_DOUBLE;
  par::check_mpi(MPI_Reduce_scatter(whole, own, counts.data(), type, MPI_SUM, group),
                 "reference sum");
}

// Sums n elements across `group`, in pieces that an int counts.
template <class V>
void sum_across(V* data, std::size_t n, MPI_Comm group) {
  const MPI_Datatype type = std::is_same_v<V, float> ? MPI_FLOAT : MPI_DOUBLE;
  for (std::size_t at = 0; at < n; at += std::size_t{1} << 30) {
    const std::size_t piece = std::min(n - at, std::size_t{1} << 30);
    par::check_mpi(
        MPI_Allreduce(MPI_IN_PLACE, data + at, static_cast<int>(piece), type, MPI_SUM, group),
        "reference sum");
  }
}

// forward, backward: every output block of this rank against the reference. A single layer's
// block that other ranks' blocks share a reference with (share_of: its replicas, or the tiles of
// the same columns) is checked against a reference those ranks compute together, each over its
// part of the inner dimension. data_parallel on p = 4, M = 4·m: dW (N × K, on every rank) costs
// each rank the products over m rows of dY and X, not M — the check stays O(own shard) as p
// grows. A block with nothing to share is computed whole, here. `plan`, `cl` and `got` are null
// on a rank whose run failed: it takes part in the collectives and checks nothing.
// \note collective over case_comm.
void check_outputs(case_run& run, par::comm& case_comm, const par::case_plan* plan,
                   const par::claims* cl, const run_result* got) {
  const par::run_case& c = run.c;
  const std::vector<tensor_slot> outputs = par::outputs_of(c);
  const bool stack = c.prob.layers() > 1;
  const bool ran = plan != nullptr;
  const bool judgeable = ran && (cl->chains.has_value() || c.mode == value_mode::exact);
  const auto takes_part = [&](const tensor_slot& t) {
    const property p = t.t == tensor::y ? property::forward : property::backward;
    return judgeable && !stack && !is_storage16(c.prob.type) && run.on(p) &&
           (*plan)[t].region.rows > 0 && (*plan)[t].region.cols > 0;
  };
  std::vector<std::uint64_t> mine(outputs.size() * share_fields, 0), all;
  for (std::size_t i = 0; ran && i < outputs.size(); ++i)
    describe_block((*plan)[outputs[i]].region, takes_part(outputs[i]),
                   mine.data() + i * share_fields);
  const int p = case_comm.size(), me = case_comm.rank();
  if (!stack) {  // a stack's reference is whole on every rank: nothing to share
    all.resize(mine.size() * static_cast<std::size_t>(p));
    par::check_mpi(
        MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_UINT64_T, all.data(),
                      static_cast<int>(mine.size()), MPI_UINT64_T, case_comm.native_handle()),
        "reference shares");
  }
  const std::vector<par::chain_lengths> chains =
      ran ? chains_or_zero(*cl, c) : std::vector<par::chain_lengths>();
  const statistical_tier tier =
      ran ? statistical_tier_of(c, chains, run.on(property::forward), run.on(property::backward),
                                cl->chains.has_value())
          : statistical_tier{};
  // A 16-bit stack's statistical tier: λ from its rounding events at the policy's coarsest u.
  const statistical_tier tier16 =
      ran && stack && is_storage16(c.prob.type) && cl->chains.has_value()
          ? mixed_stack_tier(c, chains, run.on(property::forward), run.on(property::backward))
          : statistical_tier{};
  stack_reference whole;
  mem::peak_scope scope;
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const tensor_slot& t = outputs[i];
    const property prop = t.t == tensor::y ? property::forward : property::backward;
    // 16-bit outputs are judged each against its own widened reference (no group: a group made
    // here would never be freed on that path).
    const share sh = stack || is_storage16(c.prob.type)
                         ? share{}
                         : share_of(all, i, outputs.size(), p, me, inner_of(c.prob, t.t));
    MPI_Comm group = MPI_COMM_NULL;
    if (sh.split)
      par::check_mpi(MPI_Comm_split(case_comm.native_handle(), sh.color, sh.key, &group),
                     "reference group");
    if (ran && run.on(prop) && !judgeable) run.not_claimed(prop);
    if (!ran || !run.on(prop) || !judgeable) continue;
    const par::tensor_plan& tp = (*plan)[t];
    if (is_storage16(c.prob.type) && stack) {  // the whole stack's widened reference
      try {
        const std::string bad_16 =
            c.prob.type == dtype::bf16
                ? judge_mixed_stack<bfloat16_t>(
                      c, tp, got->out(t), whole.get16<bfloat16_t>(c, chains, tier16.lambda),
                      tier16.lambda, tier16.p_fail, run.rank, plan->coords, run.v)
                : judge_mixed_stack<half_t>(
                      c, tp, got->out(t), whole.get16<half_t>(c, chains, tier16.lambda),
                      tier16.lambda, tier16.p_fail, run.rank, plan->coords, run.v);
        if (!bad_16.empty()) run.fail(prop, bad_16);
      } catch (const std::exception& x) {
        run.fail(property::runs, x.what());
      }
      continue;
    }
    if (is_storage16(c.prob.type)) {  // judged against its own widened reference, unshared
      const std::string bad_16 =
          c.prob.type == dtype::bf16
              ? judge_mixed<bfloat16_t>(c, tp, got->out(t), chains, run.rank, plan->coords, run.v)
              : judge_mixed<half_t>(c, tp, got->out(t), chains, run.rank, plan->coords, run.v);
      if (!bad_16.empty()) run.fail(prop, bad_16);
      continue;
    }
    try {
      expectation e;
      std::string error;
      if (!stack && tp.region.rows > 0 && tp.region.cols > 0) {
        const std::int64_t d = inner_of(c.prob, t.t);
        const par::index_run part{d * sh.part / sh.parts,
                                  d * (sh.part + 1) / sh.parts - d * sh.part / sh.parts};
        block region = tp.region;
        if (sh.tiles) {
          region.row0 = sh.lo;
          region.rows = sh.rows;
        }
        try {
          e = c.prob.type == dtype::f32 ? expect<float>(c, t.t, region, part)
                                        : expect<double>(c, t.t, region, part);
        } catch (const std::exception& x) {
          error = x.what();
        }
        if (group != MPI_COMM_NULL) {
          int ok = error.empty() ? 1 : 0;
          par::check_mpi(MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, group),
                         "reference group");
          if (ok == 0 && error.empty()) error = "a replica's share of the reference failed";
          if (ok == 1 && !sh.tiles) {
            std::visit([&](auto& m) { sum_across(m.data.data(), m.data.size(), group); }, e.value);
            sum_across(e.mag.data(), e.mag.size(), group);
          } else if (ok == 1) {  // this rank's rows of the run, summed
            const auto rows = static_cast<std::size_t>(tp.region.rows);
            const auto cols = static_cast<std::size_t>(tp.region.cols);
            expectation own;
            own.k_ref = e.k_ref;
            own.flops = e.flops;
            own.panel_bytes = e.panel_bytes;
            own.mag.assign(rows * cols, 0.0);
            std::visit(
                [&](auto& m) {
                  using V = typename std::decay_t<decltype(m.data)>::value_type;
                  own.value = par::make_matrix<V>(rows, cols);
                  sum_scattered(m.data.data(), std::get<matrix<V>>(own.value).data.data(),
                                sh.counts, group);
                },
                e.value);
            sum_scattered(e.mag.data(), own.mag.data(), sh.counts, group);
            e = std::move(own);
          }
          MPI_Comm_free(&group);
        }
        run.v.check_flops += e.flops;
        run.v.check_panel_bytes += e.panel_bytes;
        if (!error.empty()) throw std::runtime_error(error);
      }
      const std::string bad = c.prob.type == dtype::f32
                                  ? judge<float>(c, tp, got->out(t), chains, whole, run.rank,
                                                 plan->coords, tier, run.v, e)
                                  : judge<double>(c, tp, got->out(t), chains, whole, run.rank,
                                                  plan->coords, tier, run.v, e);
      if (!bad.empty()) run.fail(prop, bad);
    } catch (const std::exception& x) {
      if (group != MPI_COMM_NULL) MPI_Comm_free(&group);
      run.fail(property::runs, x.what());
    }
  }
  run.v.check_flops += whole.flops;
  run.v.check_panel_bytes += whole.panel_bytes;
  run.v.check_peak_bytes = static_cast<std::int64_t>(scope.peak());
  run.v.check_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// ledger: the recorded collectives and messages equal the claimed ones, entry for entry.
void check_ledger(case_run& run, const par::claims& cl, const run_result& got) {
  for (const par::ledger_entry& e : got.log) run.v.recorded_sent += e.bytes_sent;
  if (!run.on(property::ledger)) return;
  if (!cl.collectives) return run.not_claimed(property::ledger);
  const std::string bad = compare_ledger(got.log, *cl.collectives, run.rank);
  if (bad.empty()) return;
  run.fail(property::ledger, par::pmpi::linked() ? bad
                                                 : bad +
                                                       " (this program does not link "
                                                       "shardcheck::pmpi: raw MPI calls are "
                                                       "not recorded)");
}

// memory: each phase's measured peak within the claimed bound; a memory-monotone parameter (e.g. a
// bucket size) set smaller, drawn from the case's seed so that a replay repeats it, never peaks
// higher. Without the new hook only matrix<T> buffers are counted: a peak above the bound still
// fails (the whole peak is larger still), anything else is `not measured`, never a pass.
void check_memory(case_run& run, par::mesh& grid, const par::case_plan& plan, const par::claims& cl,
                  const run_result& first) {
  run.v.mpi_peak_bytes = first.mpi_peak;
  if (!run.on(property::memory)) return;
  if (!cl.peak) return run.not_claimed(property::memory);
  const par::kernel& k = *run.s.k;
  const par::run_case& c = run.c;
  const std::pair<std::int64_t, std::int64_t> phases[] = {{first.peak_forward, cl.peak->forward},
                                                          {first.peak_backward, cl.peak->backward}};
  for (std::size_t i = 0; i < 2; ++i) {
    const auto [peak, bound] = phases[i];
    const double ratio = bound > 0 ? static_cast<double>(peak) / static_cast<double>(bound)
                                   : (peak > 0 ? INFINITY : 0.0);
    if (ratio >= run.v.worst_memory) {
      run.v.worst_memory = ratio;
      run.v.peak_bytes = peak;
      run.v.bound_bytes = bound;
    }
    if (peak > bound)
      run.fail(property::memory, std::string(i == 0 ? "forward" : "backward") + " on rank " +
                                     std::to_string(run.rank) + " allocated a peak of " +
                                     std::to_string(peak) + " bytes; the cost model's bound is " +
                                     std::to_string(bound) + " bytes");
  }
  if (!mem::global_new_tracked()) {
    if ((run.v.failed & static_cast<unsigned>(property::memory)) == 0)
      run.not_measured(property::memory);
    return;
  }
  for (const par::param_spec& ps : k.info().params) {
    const std::int64_t value = c.param(ps.name);
    if (!ps.memory_monotone || value <= ps.min) continue;
    par::run_case smaller = c;
    smaller.params[ps.name] =
        ps.min + static_cast<std::int64_t>(c.seed % static_cast<std::uint64_t>(value - ps.min));
    try {
      par::complete_and_validate(k, smaller);
    } catch (const par::case_declined&) {
      continue;  // no smaller case the kernel takes to compare with
    }
    const par::case_plan small_plan = par::plan_of(k, smaller, plan.coords);
    const run_result other = run_once(k, smaller, grid, inputs_of(small_plan, smaller),
                                      k.cost(smaller, plan.coords), run.hook);
    const std::int64_t peaks[2][2] = {{first.peak_forward, other.peak_forward},
                                      {first.peak_backward, other.peak_backward}};
    for (std::size_t i = 0; i < 2; ++i)
      if (peaks[i][1] > peaks[i][0])
        run.fail(property::memory, std::string(i == 0 ? "forward" : "backward") + " on rank " +
                                       std::to_string(run.rank) + " peaks at " +
                                       std::to_string(peaks[i][1]) + " bytes with " + ps.name +
                                       "=" + std::to_string(smaller.param(ps.name)) +
                                       ", above its " + std::to_string(peaks[i][0]) +
                                       " bytes with " + ps.name + "=" + std::to_string(value) +
                                       " (a smaller " + ps.name + " must never raise the peak)");
  }
}

// determinism: a second run of the same case gives the same bits.
void check_determinism(case_run& run, par::mesh& grid, const par::case_plan& plan,
                       const rank_inputs& in, const par::claims& cl, const run_result& first) {
  if (!run.on(property::determinism)) return;
  const run_result second = run_once(*run.s.k, run.c, grid, in, cl, run.hook);
  for (const tensor_slot& t : plan.outputs) {
    const std::int64_t at = first_difference(first.out(t), second.out(t));
    if (at < 0) continue;
    const auto cols =
        static_cast<std::int64_t>(std::max<std::size_t>(par::cols_of(first.out(t)), 1));
    run.fail(property::determinism, plan[t].name + " on rank " + std::to_string(run.rank) +
                                        " differs between two runs of the same case at local (" +
                                        std::to_string(at / cols) + ", " +
                                        std::to_string(at % cols) + ")");
    return;
  }
}

// A tiled block's runs folded into the block's description (0 for a contiguous block).
std::uint64_t runs_key(const std::vector<par::index_run>& runs) {
  std::uint64_t h = 0;
  for (const par::index_run& r : runs)
    h = (h ^ static_cast<std::uint64_t>(r.offset)) * 1099511628211ull ^
        static_cast<std::uint64_t>(r.length);
  return h;
}

// What a rank tells the others of each output for the replica check: a flag (it ran), the block,
// and the hash of its bits.
constexpr std::size_t replica_fields = 5;
void describe_outputs(const par::case_plan& plan, const run_result& got,
                      std::vector<std::uint64_t>& mine) {
  for (std::size_t i = 0; i < plan.outputs.size(); ++i) {
    const block& b = plan[plan.outputs[i]].region;
    const std::uint64_t desc[replica_fields] = {
        1, static_cast<std::uint64_t>(b.row0) ^ runs_key(b.row_runs),
        static_cast<std::uint64_t>(b.rows),
        (static_cast<std::uint64_t>(b.col0) << 32 | static_cast<std::uint64_t>(b.cols)) ^
            runs_key(b.col_runs),
        hash_bits(got.out(plan.outputs[i]))};
    std::copy(desc, desc + replica_fields,
              mine.begin() + static_cast<std::ptrdiff_t>(i * replica_fields));
  }
}

// replicas: ranks holding the same block of an output hold the same bits. Every rank takes part,
// even after a failure. \note collective over case_comm.
void check_replicas(case_run& run, par::comm& case_comm, const std::vector<tensor_slot>& outputs,
                    const std::vector<std::uint64_t>& mine) {
  if (!run.on(property::replicas)) return;
  std::vector<std::uint64_t> all(mine.size() * static_cast<std::size_t>(case_comm.size()));
  par::check_mpi(
      MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_UINT64_T, all.data(),
                    static_cast<int>(mine.size()), MPI_UINT64_T, case_comm.native_handle()),
      "replica exchange");
  for (int q = 0; q < case_comm.size(); ++q) {
    if (q == run.rank) continue;
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      const std::uint64_t* a = mine.data() + i * replica_fields;
      const std::uint64_t* b =
          all.data() + (static_cast<std::size_t>(q) * outputs.size() + i) * replica_fields;
      if (a[0] == 0 || b[0] == 0) continue;  // a rank that failed to run holds nothing
      if (std::equal(a, a + 4, b) && a[4] != b[4])
        return run.fail(property::replicas, par::name_of(outputs[i], run.c) + " rows " +
                                                std::to_string(a[1]) + "+" + std::to_string(a[2]) +
                                                " is replicated on ranks " +
                                                std::to_string(run.rank) + " and " +
                                                std::to_string(q) + " with different bits");
    }
  }
}

}  // namespace

double statistical_events(const par::run_case& c, std::span<const par::chain_lengths> chains,
                          bool forward, bool backward) {
  const auto& p = c.prob;
  const std::vector<std::int64_t> d = p.widths();
  const auto rows = static_cast<double>(p.M);
  const bool stack = d.size() > 2;  // every layer's H_l is bounded, whatever is judged
  double events = 0;
  for (std::size_t l = 1; l < d.size() && l <= chains.size(); ++l) {
    const auto in = static_cast<double>(d[l - 1]), out = static_cast<double>(d[l]);
    const par::chain_lengths& k = chains[l - 1];
    // Per element and computation, one event per term of its dot product (each term's rounding
    // factors are the chain, at most k): the contraction length, or the chain if it is longer.
    const auto terms = [](std::int64_t k_par, std::int64_t n) {
      return static_cast<double>(std::max(k_par, n) + n);
    };
    if (forward || stack) events += rows * out * terms(k.y, d[l - 1]);
    if (backward) {
      events += rows * in * terms(k.dx, d[l]);
      events += out * in * terms(k.dw, p.M);
    }
  }
  return events;
}

std::size_t error_figures::index(dtype t, par::tensor out, value_mode m) {
  const std::size_t ti = out == tensor::y ? 0 : out == tensor::dx ? 1 : 2;
  return (static_cast<std::size_t>(t) * tensors + ti) * modes + static_cast<std::size_t>(m);
}

void error_figures::merge(const error_figures& o) {
  for (std::size_t i = 0; i < size; ++i) {
    cells[i].err_u_mag = std::max(cells[i].err_u_mag, o.cells[i].err_u_mag);
    cells[i].rigorous = std::max(cells[i].rigorous, o.cells[i].rigorous);
    cells[i].statistical = std::max(cells[i].statistical, o.cells[i].statistical);
  }
}

error_cell error_figures::over_modes(dtype t, par::tensor out) const {
  error_cell c;
  for (std::size_t m = 0; m < modes; ++m) {
    const error_cell& x = cells[index(t, out, static_cast<value_mode>(m))];
    c.err_u_mag = std::max(c.err_u_mag, x.err_u_mag);
    c.rigorous = std::max(c.rigorous, x.rigorous);
    c.statistical = std::max(c.statistical, x.statistical);
  }
  return c;
}

double error_figures::worst_u_mag() const {
  double w = 0;
  for (const error_cell& c : cells) w = std::max(w, c.err_u_mag);
  return w;
}

rank_inputs inputs_of(const par::case_plan& plan, const par::run_case& c) {
  rank_inputs in;
  for (const par::tensor_plan& t : plan.tensors) {
    if (!t.is_input()) continue;
    any_matrix m = generate_block(c, t);
    if (t.slot.t == tensor::x)
      in.x = std::move(m);
    else if (t.slot.t == tensor::dy)
      in.dy = std::move(m);
    else
      in.ws.push_back(std::move(m));
  }
  return in;
}

verdict run_on_rank(const subject& s, const par::run_case& c, par::comm& case_comm, unsigned mask) {
  case_run run{s, c, mask, case_comm.rank(), {}};
  const std::vector<tensor_slot> outputs = par::outputs_of(c);
  std::vector<std::uint64_t> mine(outputs.size() * replica_fields, 0);
  // The run, then the outputs' check (collective: replicas share references), then the rest.
  std::optional<par::mesh> grid;
  std::optional<par::case_plan> plan;
  std::optional<par::claims> cl;
  std::optional<rank_inputs> in;
  std::optional<run_result> first;
  std::unique_ptr<par::pmpi::interceptor> hook;
  try {
    grid.emplace(case_comm, s.k->mesh_dims(c), par::stack_options{c.backend, s.wrap});
    if (s.raw) {
      std::vector<MPI_Comm> comms;
      for (const par::pmpi::tracked_comm& t : raw_comms(*grid)) comms.push_back(t.comm);
      hook = s.raw(comms);
      run.hook = hook.get();
    }
    plan.emplace(par::plan_of(*s.k, c, grid->coords()));
    cl.emplace(s.k->cost(c, plan->coords));
    if (cl->chains && cl->chains->size() != c.prob.layers())
      throw error("cost() claims " + std::to_string(cl->chains->size()) +
                  " chain_lengths for a case of L = " + std::to_string(c.prob.layers()) +
                  " layers: one per layer");
    in.emplace(inputs_of(*plan, c));
    first.emplace(run_once(*s.k, c, *grid, *in, *cl, run.hook));
  } catch (const std::exception& e) {
    run.fail(property::runs, e.what());
  }
  const bool ran = first.has_value();
  check_outputs(run, case_comm, ran ? &*plan : nullptr, ran ? &*cl : nullptr,
                ran ? &*first : nullptr);
  if (ran) try {
      check_ledger(run, *cl, *first);
      check_memory(run, *grid, *plan, *cl, *first);
      // A kernel not deterministic by design claims nothing to judge: never run, never a pass.
      if (s.k->info().deterministic)
        check_determinism(run, *grid, *plan, *in, *cl, *first);
      else if (run.on(property::determinism))
        run.not_claimed(property::determinism);
      describe_outputs(*plan, *first, mine);
    } catch (const std::exception& e) {
      run.fail(property::runs, e.what());
    }
  check_replicas(run, case_comm, outputs, mine);
  return run.v;
}

std::vector<par::ledger_entry> recorded_ledger(const subject& s, const par::run_case& c,
                                               par::comm& case_comm) {
  par::mesh grid(case_comm, s.k->mesh_dims(c), par::stack_options{c.backend, s.wrap});
  const par::case_plan plan = par::plan_of(*s.k, c, grid.coords());
  const par::claims cl = s.k->cost(c, plan.coords);
  return run_once(*s.k, c, grid, inputs_of(plan, c), cl).log;
}

}  // namespace shardcheck::prop
