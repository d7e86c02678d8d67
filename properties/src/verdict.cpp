#include "shardcheck/properties/verdict.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <tuple>
#include <type_traits>

#include "shardcheck/parallel/plan.hpp"
#include "shardcheck/reference/bound.hpp"
#include "shardcheck/reference/data.hpp"
#include "shardcheck/reference/gemm.hpp"
#include "shardcheck/reference/oracle.hpp"

namespace shardcheck::prop {

using par::any_matrix;
using par::block;
using par::matrix;
using par::tensor;
using par::tensor_slot;

// --- the case's values ------------------------------------------------------------------------

template <class T>
matrix<T> case_values(const par::run_case& c, tensor_slot t, std::span<const par::index_run> rows,
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
matrix<T> case_values(const par::run_case& c, tensor_slot t, std::int64_t row0, std::int64_t rows,
                      std::int64_t col0, std::int64_t cols) {
  const par::index_run r{row0, rows}, q{col0, cols};
  return case_values<T>(c, t, std::span(&r, rows > 0 ? 1 : 0), std::span(&q, cols > 0 ? 1 : 0));
}

namespace {
// An input placed P on mesh axis `axis`: each element replaced by this rank's share of it
// (ref::partial_share), at its global indices.
template <class T>
matrix<T> shares_of(const par::run_case& c, const par::case_plan& plan, const par::tensor_plan& t,
                    std::size_t axis, matrix<T> m) {
  const auto rows = par::runs_of_rows(t.region), cols = par::runs_of_cols(t.region);
  const int grid = c.mode == value_mode::exact ? std::max(ref::exact_grid_of(c.prob), 0) : 3;
  const int coord = plan.coords.at(axis), parts = plan.dims.at(axis);
  std::size_t i = 0;
  for (const par::index_run& r : rows)
    for (std::int64_t gi = r.offset; gi < r.offset + r.length; ++gi, ++i) {
      std::size_t j = 0;
      for (const par::index_run& q : cols)
        for (std::int64_t gj = q.offset; gj < q.offset + q.length; ++gj, ++j)
          m.row(i)[j] = ref::partial_share<T>(m.row(i)[j], c.mode, c.seed, t.data_id,
                                              static_cast<std::uint64_t>(gi),
                                              static_cast<std::uint64_t>(gj), coord, parts, grid);
    }
  return m;
}

template <class T>
any_matrix block_values(const par::run_case& c, const par::case_plan& plan,
                        const par::tensor_plan& t) {
  matrix<T> m = case_values<T>(c, t.slot, par::runs_of_rows(t.region), par::runs_of_cols(t.region));
  for (std::size_t a = 0; a < t.where.size(); ++a)
    if (t.where[a].what == par::placement::kind::partial)
      return shares_of<T>(c, plan, t, a, std::move(m));
  return m;
}
}  // namespace

any_matrix case_block(const par::run_case& c, const par::case_plan& plan,
                      const par::tensor_plan& t) {
  switch (c.prob.type) {
    case dtype::f32: return block_values<float>(c, plan, t);
    case dtype::bf16: return block_values<bfloat16_t>(c, plan, t);
    case dtype::f16: return block_values<half_t>(c, plan, t);
    case dtype::f64: break;
  }
  return block_values<double>(c, plan, t);
}

// --- the statistical tier ---------------------------------------------------------------------

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

namespace {

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

std::int64_t chain_of(const par::chain_lengths& l, tensor t) {
  return t == tensor::y ? l.y : t == tensor::dx ? l.dx : l.dw;
}

std::int64_t inner_of(const problem& p, tensor t) {
  return t == tensor::y ? p.K : t == tensor::dx ? p.N : p.M;
}

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

bool placed_partial(const par::case_plan& plan) {
  return std::any_of(plan.tensors.begin(), plan.tensors.end(), [](const par::tensor_plan& t) {
    return std::any_of(t.where.begin(), t.where.end(), [](const par::placement& pl) {
      return pl.what == par::placement::kind::partial;
    });
  });
}

statistical_tier tier_of(const par::run_case& c, std::span<const par::chain_lengths> chains,
                         bool forward, bool backward, bool claimed, bool partial_inputs) {
  if (c.mode == value_mode::exact || !claimed || chains.empty()) return {};
  if (is_storage16(c.prob.type)) {
    if (c.prob.layers() > 1) return mixed_stack_tier(c, chains, forward, backward);
    const mixed_windows w = mixed_windows_of(c, chains, tensor::y);
    return {w.lambda, ref::false_alarm(w.events, w.lambda, 0x1p-24)};
  }
  const double events = statistical_events(c, chains, forward, backward);
  const double u = ref::unit_roundoff(c.prob.type);
  statistical_tier st;
  if (!data_aware_applies(c, partial_inputs)) {
    st.lambda = ref::lambda_for(events, ref::statistical_p_fail, u);
    st.p_fail = ref::false_alarm(events, st.lambda, u);
    return st;
  }
  // The data-aware bound beside it (bound.hpp data_aware_bound): one Azuma event per judged
  // element and computation (the kernel's, the reference's); one Hoeffding event per node of each
  // tree with two or more terms — the sets of terms below a tree's nodes are laminar, so at most
  // inner − 1 of them, however the tree pads or nests. Half the probability to the magnitude
  // bound, a quarter to each of these.
  const problem& p = c.prob;
  const auto d = [](std::int64_t v) { return static_cast<double>(v); };
  double elements = 0, nodes = 0;
  const auto add = [&](double n, std::int64_t inner) {
    elements += 2 * n;
    nodes += 2 * n * d(std::max<std::int64_t>(inner - 1, 1));
  };
  if (forward) add(d(p.M) * d(p.N), p.K);
  if (backward) {
    add(d(p.M) * d(p.K), p.N);
    add(d(p.N) * d(p.K), p.M);
  }
  const double pf = ref::statistical_p_fail;
  st.lambda = ref::lambda_for(events, pf / 2, u);
  st.lambda_a = ref::lambda_for(elements, pf / 4, 0);
  st.lambda_d = ref::lambda_for(nodes, pf / 4, 0);
  st.p_fail = ref::false_alarm(events, st.lambda, u) + ref::false_alarm(elements, st.lambda_a, 0) +
              ref::false_alarm(nodes, st.lambda_d, 0);
  return st;
}

// --- the tolerance of an element --------------------------------------------------------------

tolerance tolerance_of(const par::run_case& c, std::span<const par::chain_lengths> chains, tensor t,
                       const statistical_tier& tier) {
  tolerance tol;
  tol.type = c.prob.type;
  tol.bitwise = c.mode == value_mode::exact;
  tol.window = is_storage16(c.prob.type);
  tol.tier = tier;
  tol.policy = c.policy;
  tol.k_ref = inner_of(c.prob, t);
  if (c.prob.layers() > 1) {  // each element's bounds come with the stack's reference
    tol.per_element = true;
    tol.rigorous = tol.statistical = 1;
    return tol;
  }
  tol.k_mag = tol.k_ref;
  if (tol.window) {
    const mixed_windows w = mixed_windows_of(c, chains, t);
    tol.rigorous = w.rigorous;
    tol.statistical = w.statistical;
    tol.k_par = w.k_par;
    tol.k_red = w.k_red;
    return tol;
  }
  tol.k_par = chain_of(chains.front(), t);
  tol.k_red = std::min(reduced_of(chains.front(), t), tol.k_par);
  tol.rigorous = ref::gamma(tol.k_par, tol.type) + ref::gamma(tol.k_ref, tol.type);
  if (tier.lambda > 0)
    tol.statistical = ref::tier_gamma(tol.k_par, tol.type, tier.lambda) +
                      ref::tier_gamma(tol.k_ref, tol.type, tier.lambda);
  return tol;
}

// --- the reference of a block -----------------------------------------------------------------

namespace {

// One run of n (none when empty).
std::vector<par::index_run> run_list(par::index_run r) {
  if (r.length == 0) return {};
  return {r};
}

template <class T>
matrix<float> widened(const matrix<T>& m) {
  matrix<float> out(m.rows, m.cols);
  ref::widen<T>(m.data.data(), m.data.size(), out.data.data());
  return out;
}

// The two operands block b of output t is made of, over the inner indices `inner` (`gen(t, row
// runs, column runs)` makes them: the case's values in S, or widened from a 16-bit T): X and W
// for Y, dY and W for dX, dY and X for dW, each laid out as the case's layout has it.
template <class S, class Generate>
std::pair<matrix<S>, matrix<S>> panels_of(const par::run_case& c, tensor t, const block& b,
                                          par::index_run inner, const Generate& gen) {
  const bool out_in = c.prob.layout == weight_layout::out_in;
  const auto b_rows = par::runs_of_rows(b), b_cols = par::runs_of_cols(b);
  const auto in = run_list(inner);
  if (t == tensor::y)
    return {gen(tensor::x, b_rows, in),
            out_in ? gen(tensor::w, b_cols, in) : gen(tensor::w, in, b_cols)};
  if (t == tensor::dx)
    return {gen(tensor::dy, b_rows, in),
            out_in ? gen(tensor::w, in, b_cols) : gen(tensor::w, b_cols, in)};
  // out_in: dW block is (N rows) × (K cols) = dY[:, rows]ᵀ · X[:, cols];
  // in_out: (K rows) × (N cols) = X[:, rows]ᵀ · dY[:, cols].
  return {gen(tensor::dy, in, out_in ? b_rows : b_cols),
          gen(tensor::x, in, out_in ? b_cols : b_rows)};
}

// Block b's values (to `out`) or the magnitude products of its panels (to `mag`): |A||B|ᵀ, or
// with `squares` (A∘A)(B∘B)ᵀ.
template <class S>
void products_of(const par::run_case& c, tensor t, const block& b, par::index_run inner,
                 const matrix<S>& a, const matrix<S>& w, S* out, double* mag, bool squares) {
  const auto& p = c.prob;
  const bool out_in = p.layout == weight_layout::out_in;
  const auto rows = static_cast<std::size_t>(b.rows), cols = static_cast<std::size_t>(b.cols);
  const auto in = static_cast<std::size_t>(inner.length);
  if (t == tensor::y) {
    if (out != nullptr)
      ref::linear_forward<S>(p.layout, rows, cols, in, a.data.data(), w.data.data(), out);
    if (mag != nullptr)
      ref::magnitude_forward<S>(p.layout, rows, cols, in, a.data.data(), w.data.data(), mag,
                                squares);
  } else if (t == tensor::dx) {
    if (out != nullptr)
      ref::linear_backward_dx<S>(p.layout, rows, in, cols, a.data.data(), w.data.data(), out);
    if (mag != nullptr)
      ref::magnitude_backward_dx<S>(p.layout, rows, in, cols, a.data.data(), w.data.data(), mag,
                                    squares);
  } else {
    const auto n_out = out_in ? rows : cols, k_in = out_in ? cols : rows;
    if (out != nullptr)
      ref::linear_backward_dw<S>(p.layout, in, n_out, k_in, a.data.data(), w.data.data(), out);
    if (mag != nullptr)
      ref::magnitude_backward_dw<S>(p.layout, in, n_out, k_in, a.data.data(), w.data.data(), mag,
                                    squares);
  }
}

// Block b's values (to `out`), its magnitude products |A||B|ᵀ (to `mag`) and, when given, the
// data-aware bound's (A∘A)(B∘B)ᵀ (to `sq`), +∞ where a term's factors both have a fixed sign.
template <class S>
void product_of(const par::run_case& c, tensor t, const block& b, par::index_run inner,
                const matrix<S>& a, const matrix<S>& w, S* out, double* mag, double* sq = nullptr) {
  products_of<S>(c, t, b, inner, a, w, out, mag, false);
  if (sq == nullptr) return;
  products_of<S>(c, t, b, inner, a, w, nullptr, sq, true);
  const auto any_fixed = [&](const matrix<S>& m) {
    return std::any_of(m.data.begin(), m.data.end(),
                       [&](S v) { return ref::fixed_sign(c.mode, v); });
  };
  // Rare (uniform's −1 in both panels): only then count the terms with two of them.
  if (!any_fixed(a) || !any_fixed(w)) return;
  const auto fixed = [&](const matrix<S>& m) {
    matrix<S> f(m.rows, m.cols);
    for (std::size_t i = 0; i < m.data.size(); ++i)
      if (ref::fixed_sign(c.mode, m.data[i])) f.data[i] = S(1);
    return f;
  };
  const matrix<S> fa = fixed(a), fw = fixed(w);
  std::vector<double> both(static_cast<std::size_t>(b.rows) * static_cast<std::size_t>(b.cols));
  products_of<S>(c, t, b, inner, fa, fw, nullptr, both.data(), false);
  for (std::size_t i = 0; i < both.size(); ++i)
    if (both[i] > 0) sq[i] = std::numeric_limits<double>::infinity();
}

// The reference for block b of output t in S: its values, and with `magnitudes` its magnitude
// products (else `mag` is left empty), from the panels `gen` makes (panels_of), which `keep`
// (when given) receives for staged_reference's magnitudes later.
template <class S, class Generate>
block_reference expect_from(const par::run_case& c, tensor t, const block& b, par::index_run inner,
                            const Generate& gen, bool magnitudes,
                            std::pair<matrix<S>, matrix<S>>* keep = nullptr) {
  const auto& p = c.prob;
  const auto rows = static_cast<std::size_t>(b.rows), cols = static_cast<std::size_t>(b.cols);
  block_reference e;
  e.value = par::make_matrix<S>(rows, cols);
  e.k_ref = inner_of(p, t);
  const bool squares = magnitudes && data_aware_applies(c, false);
  if (magnitudes) e.mag.assign(rows * cols, 0.0);
  if (squares) e.sq.assign(rows * cols, 0.0);
  // value, magnitude and squares: 2 flops per multiply-add each; the panels: (rows + cols) ×
  // inner.
  e.flops = checked_mul(
      checked_mul((2 + (magnitudes ? 2 : 0) + (squares ? 2 : 0)) * b.rows, b.cols, "check flops"),
      inner.length, "check flops");
  e.panel_bytes =
      checked_mul(checked_add(b.rows, b.cols, "check bytes"), inner.length, "check bytes") *
      static_cast<std::int64_t>(sizeof(S));
  if (inner.length == 0) return e;  // no inner index here: a zero part
  std::pair<matrix<S>, matrix<S>> panels = panels_of<S>(c, t, b, inner, gen);
  product_of<S>(c, t, b, inner, panels.first, panels.second,
                std::get<matrix<S>>(e.value).data.data(), magnitudes ? e.mag.data() : nullptr,
                squares ? e.sq.data() : nullptr);
  if (keep != nullptr) *keep = std::move(panels);
  return e;
}

// The reference in the case's f32 / f64 (T) itself.
template <class T>
block_reference expect(const par::run_case& c, tensor t, const block& b, par::index_run inner,
                       bool magnitudes, std::pair<matrix<T>, matrix<T>>* keep = nullptr) {
  return expect_from<T>(
      c, t, b, inner,
      [&](tensor u, const auto& rows, const auto& cols) {
        return case_values<T>(c, u, rows, cols);
      },
      magnitudes, keep);
}

// The f32 value b (before rounding to T) of block b of output t, and its magnitude product, from
// the inputs generated in T and widened (products exact in f32), summed on OpenBLAS's sgemm.
template <class T>
block_reference expect_widened(const par::run_case& c, tensor t, const block& b) {
  return expect_from<float>(
      c, t, b, {0, inner_of(c.prob, t)},
      [&](tensor u, const auto& rows, const auto& cols) {
        return widened(case_values<T>(c, u, rows, cols));
      },
      true);
}

}  // namespace

block_reference reference_of_block(const par::run_case& c, tensor t, const block& b,
                                   par::index_run inner) {
  switch (c.prob.type) {
    case dtype::f32: return expect<float>(c, t, b, inner, true);
    case dtype::f64: return expect<double>(c, t, b, inner, true);
    case dtype::bf16: return expect_widened<bfloat16_t>(c, t, b);
    case dtype::f16: return expect_widened<half_t>(c, t, b);
  }
  throw error("reference_of_block: unknown dtype");
}

any_matrix reference_values_of_block(const par::run_case& c, tensor t, const block& b,
                                     par::index_run inner) {
  switch (c.prob.type) {
    case dtype::f32: return std::move(expect<float>(c, t, b, inner, false).value);
    case dtype::f64: return std::move(expect<double>(c, t, b, inner, false).value);
    case dtype::bf16: return std::move(expect_widened<bfloat16_t>(c, t, b).value);
    case dtype::f16: return std::move(expect_widened<half_t>(c, t, b).value);
  }
  throw error("reference_values_of_block: unknown dtype");
}

staged_reference::staged_reference(const par::run_case& c, tensor t, const block& b,
                                   par::index_run inner)
    : c_(c), t_(t), b_(b), inner_(inner) {
  const auto from = [&]<class S>() {
    std::pair<matrix<S>, matrix<S>> keep;
    e_ = expect<S>(c, t, b, inner, false, &keep);
    a_ = std::move(keep.first);
    w_ = std::move(keep.second);
    panels_held_ = true;
  };
  switch (c.prob.type) {
    case dtype::f32: from.template operator()<float>(); return;
    case dtype::f64: from.template operator()<double>(); return;
    case dtype::bf16:
    case dtype::f16: break;
  }
  throw error("staged_reference: a single layer in f32 or f64 only");
}

void staged_reference::add_magnitudes() {
  if (has_magnitudes_) return;
  const auto rows = static_cast<std::size_t>(b_.rows), cols = static_cast<std::size_t>(b_.cols);
  const bool squares = data_aware_applies(c_, false);
  e_.mag.assign(rows * cols, 0.0);
  if (squares) e_.sq.assign(rows * cols, 0.0);
  e_.flops += checked_mul(checked_mul((squares ? 4 : 2) * b_.rows, b_.cols, "check flops"),
                          inner_.length, "check flops");
  has_magnitudes_ = true;
  if (inner_.length == 0) return;
  const auto from = [&]<class S>() {
    if (!panels_held_) {  // dropped: made again, the same values from the case's seed
      auto panels = panels_of<S>(c_, t_, b_, inner_, [&](tensor u, const auto& r, const auto& q) {
        return case_values<S>(c_, u, r, q);
      });
      a_ = std::move(panels.first);
      w_ = std::move(panels.second);
      panels_held_ = true;
    }
    product_of<S>(c_, t_, b_, inner_, std::get<matrix<S>>(a_), std::get<matrix<S>>(w_), nullptr,
                  e_.mag.data(), squares ? e_.sq.data() : nullptr);
  };
  if (c_.prob.type == dtype::f32)
    from.template operator()<float>();
  else
    from.template operator()<double>();
}

void staged_reference::drop_panels() {
  a_ = matrix<float>();
  w_ = matrix<float>();
  panels_held_ = false;
}

std::vector<block_reference> whole_references(const par::run_case& c) {
  std::vector<block_reference> out;
  for (const tensor_slot& t : par::outputs_of(c)) {
    const auto [rows, cols] = par::dim_names(t, c.prob);
    const block b{0, par::dim_length(c.prob, rows), 0, par::dim_length(c.prob, cols)};
    out.push_back(reference_of_block(c, t.t, b, {0, inner_of(c.prob, t.t)}));
  }
  return out;
}

block_reference slice_of(const par::run_case& c, tensor_slot t, const block& b,
                         const block_reference& whole) {
  const auto full_cols =
      static_cast<std::size_t>(par::dim_length(c.prob, par::dim_names(t, c.prob).second));
  const auto br = static_cast<std::size_t>(b.rows), bc = static_cast<std::size_t>(b.cols);
  const auto b_rows = par::runs_of_rows(b), b_cols = par::runs_of_cols(b);
  std::vector<std::size_t> at(br * bc);
  for (std::size_t i = 0; i < br; ++i)
    for (std::size_t j = 0; j < bc; ++j)
      at[i * bc + j] =
          static_cast<std::size_t>(par::global_index(b_rows, static_cast<std::int64_t>(i))) *
              full_cols +
          static_cast<std::size_t>(par::global_index(b_cols, static_cast<std::int64_t>(j)));
  const auto pick = [&](const std::vector<double>& from) {
    std::vector<double> out;
    if (from.empty()) return out;
    out.resize(at.size());
    for (std::size_t i = 0; i < at.size(); ++i) out[i] = from[at[i]];
    return out;
  };
  block_reference e;
  e.k_ref = whole.k_ref;
  e.mag = pick(whole.mag);
  e.stat_bound = pick(whole.stat_bound);
  e.sq = pick(whole.sq);
  e.stack_mag = pick(whole.stack_mag);
  std::visit(
      [&](const auto& m) {
        using V = typename std::decay_t<decltype(m.data)>::value_type;
        e.value = par::make_matrix<V>(br, bc);
        V* out = std::get<matrix<V>>(e.value).data.data();
        for (std::size_t i = 0; i < at.size(); ++i) out[i] = m.data[at[i]];
      },
      whole.value);
  return e;
}

// --- the reference of a whole stack -----------------------------------------------------------

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

namespace {

// The whole stack's inputs in S: X and dY on the given rows (all when null), every W_l whole,
// each made by `gen(slot, row0, rows, col0, cols)`.
template <class S>
struct stack_inputs {
  matrix<S> x, dy;
  std::vector<matrix<S>> ws;
  std::vector<const S*> w_ptrs;
};

template <class S, class Generate>
stack_inputs<S> stack_inputs_of(const par::run_case& c, const Generate& gen) {
  const auto& p = c.prob;
  const ref::stack_shape shape{p.layout, p.widths(), p.act};
  stack_inputs<S> in;
  in.x = gen(tensor_slot{tensor::x, 0}, 0, p.M, 0, p.K);
  in.dy = gen(tensor_slot{tensor::dy, 0}, 0, p.M, 0, p.N);
  for (std::size_t l = 0; l < shape.layers(); ++l) {
    const bool out_in = p.layout == weight_layout::out_in;
    const auto out = static_cast<std::int64_t>(shape.width(l + 1));
    const auto in_w = static_cast<std::int64_t>(shape.width(l));
    in.ws.push_back(gen(tensor_slot{tensor::w, l}, 0, out_in ? out : in_w, 0, out_in ? in_w : out));
  }
  for (const auto& w : in.ws) in.w_ptrs.push_back(w.data.data());
  return in;
}

// The reference and bounds of a stack on `rows` rows of X (and dY, when not null), and at λ > 0
// the statistical tier's bounds: the same induction with γ̃ (stack.hpp).
template <class S>
ref::stack_expectation<S> stack_expect_tiers(const par::run_case& c, std::size_t rows, const S* x,
                                             std::span<const S* const> ws, const S* dy,
                                             std::span<const par::chain_lengths> layer_chains,
                                             dtype t, double lambda,
                                             const ref::stack_storage* storage) {
  const auto& p = c.prob;
  const ref::stack_shape shape{p.layout, p.widths(), p.act};
  const ref::stack_chains chains = stack_chains_of(layer_chains);
  ref::stack_expectation<S> e = ref::stack_expect<S>(shape, rows, x, ws, dy, chains, t, 0, storage);
  if (lambda > 0) {
    ref::stack_expectation<S> st =
        ref::stack_expect<S>(shape, rows, x, ws, dy, chains, t, lambda, storage);
    e.y_stat_bound = std::move(st.y_bound);
    e.dx_stat_bound = std::move(st.dx_bound);
    e.dw_stat_bound = std::move(st.dw_bound);
  }
  return e;
}

template <class T>
ref::stack_expectation<float> expect_whole_stack16(const par::run_case& c,
                                                   std::span<const par::chain_lengths> layer_chains,
                                                   double lambda) {
  const auto& p = c.prob;
  const stack_inputs<float> in = stack_inputs_of<float>(
      c, [&](tensor_slot s, auto... at) { return widened(case_values<T>(c, s, at...)); });
  const ref::stack_storage storage{p.type, c.policy};
  const float none{};
  const float* dy_ptr = in.dy.data.empty() ? &none : in.dy.data.data();
  return stack_expect_tiers<float>(c, static_cast<std::size_t>(p.M), in.x.data.data(), in.w_ptrs,
                                   dy_ptr, layer_chains, dtype::f32, lambda, &storage);
}

}  // namespace

template <class T>
ref::stack_expectation<T> whole_stack_reference(const par::run_case& c,
                                                std::span<const par::chain_lengths> chains,
                                                double lambda,
                                                const std::vector<par::index_run>* rows) {
  const auto& p = c.prob;
  const auto gen = [&](tensor_slot s, auto... at) { return case_values<T>(c, s, at...); };
  if (rows != nullptr) {  // the given rows of X, forward only
    const par::index_run k{0, p.K};
    const matrix<T> x = case_values<T>(c, {tensor::x, 0}, *rows, std::span(&k, p.K > 0 ? 1 : 0));
    stack_inputs<T> in;
    const ref::stack_shape shape{p.layout, p.widths(), p.act};
    for (std::size_t l = 0; l < shape.layers(); ++l) {
      const bool out_in = p.layout == weight_layout::out_in;
      const auto out = static_cast<std::int64_t>(shape.width(l + 1));
      const auto in_w = static_cast<std::int64_t>(shape.width(l));
      in.ws.push_back(
          gen(tensor_slot{tensor::w, l}, 0, out_in ? out : in_w, 0, out_in ? in_w : out));
    }
    for (const auto& w : in.ws) in.w_ptrs.push_back(w.data.data());
    return stack_expect_tiers<T>(c, x.rows, x.data.data(), in.w_ptrs, nullptr, chains, p.type,
                                 lambda, nullptr);
  }
  const stack_inputs<T> in = stack_inputs_of<T>(c, gen);
  // stack_expect reads a null dY as "forward only": an empty dY (no rows or N = 0) is not null.
  const T none{};
  const T* dy_ptr = in.dy.data.empty() ? &none : in.dy.data.data();
  return stack_expect_tiers<T>(c, static_cast<std::size_t>(p.M), in.x.data.data(), in.w_ptrs,
                               dy_ptr, chains, p.type, lambda, nullptr);
}

template ref::stack_expectation<float> whole_stack_reference<float>(
    const par::run_case&, std::span<const par::chain_lengths>, double,
    const std::vector<par::index_run>*);
template ref::stack_expectation<double> whole_stack_reference<double>(
    const par::run_case&, std::span<const par::chain_lengths>, double,
    const std::vector<par::index_run>*);

ref::stack_expectation<float> mixed_stack_reference(const par::run_case& c,
                                                    std::span<const par::chain_lengths> chains,
                                                    double lambda) {
  if (c.prob.type == dtype::bf16) return expect_whole_stack16<bfloat16_t>(c, chains, lambda);
  if (c.prob.type == dtype::f16) return expect_whole_stack16<half_t>(c, chains, lambda);
  throw error("mixed_stack_reference: the case is not stored in bf16 / f16");
}

template <class V>
block_reference slice_stack(const par::run_case& c, tensor_slot t, const block& b,
                            const ref::stack_expectation<V>& all) {
  const auto& p = c.prob;
  const std::vector<V>& value = t.t == tensor::y    ? all.y
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
  block_reference e;
  e.value = par::make_matrix<V>(br, bc);
  e.mag.assign(br * bc, 0.0);
  if (!mag.empty()) e.stack_mag.assign(br * bc, 0.0);
  e.k_ref = inner_of(p, t.t);
  if (stat) e.stat_bound.assign(br * bc, 0.0);
  V* out = std::get<matrix<V>>(e.value).data.data();
  const auto b_rows = par::runs_of_rows(b), b_cols = par::runs_of_cols(b);
  for (std::size_t i = 0; i < br; ++i)
    for (std::size_t j = 0; j < bc; ++j) {
      const auto gi = par::global_index(b_rows, static_cast<std::int64_t>(i));
      const auto gj = par::global_index(b_cols, static_cast<std::int64_t>(j));
      const std::size_t at =
          static_cast<std::size_t>(gi) * full_cols + static_cast<std::size_t>(gj);
      out[i * bc + j] = value[at];
      e.mag[i * bc + j] = bound[at];
      if (!mag.empty()) e.stack_mag[i * bc + j] = mag[at];
      if (stat) e.stat_bound[i * bc + j] = stat_bound[at];
    }
  return e;
}

template block_reference slice_stack<float>(const par::run_case&, tensor_slot, const block&,
                                            const ref::stack_expectation<float>&);
template block_reference slice_stack<double>(const par::run_case&, tensor_slot, const block&,
                                             const ref::stack_expectation<double>&);

block_reference forward_reference(const par::run_case& c, const par::block& b,
                                  std::span<const par::chain_lengths> chains, double lambda) {
  if (c.prob.layers() == 1) return reference_of_block(c, tensor::y, b, {0, c.prob.K});
  if (c.prob.type != dtype::f32 && c.prob.type != dtype::f64)
    throw invalid_problem("forward_reference: a stack's rows in f32 or f64 only");
  const std::vector<par::index_run> rows = par::runs_of_rows(b);
  // The expectation holds b's rows in order: block b is its rows 0 … b.rows − 1.
  par::run_case local = c;
  local.prob.M = b.rows;
  par::block own = b;
  own.row0 = 0;
  own.row_runs.clear();
  if (c.prob.type == dtype::f32)
    return slice_stack(local, {tensor::y, 0}, own,
                       whole_stack_reference<float>(c, chains, lambda, &rows));
  return slice_stack(local, {tensor::y, 0}, own,
                     whole_stack_reference<double>(c, chains, lambda, &rows));
}

block_reference stack_reference::block(const par::run_case& c, tensor_slot t, const par::block& b,
                                       std::span<const par::chain_lengths> chains, double lambda) {
  const auto& p = c.prob;
  const bool wide32 = p.type != dtype::f64;  // f32, and bf16 / f16 in f32
  if (std::holds_alternative<std::monostate>(all_)) {
    if (is_storage16(p.type))
      all_ = mixed_stack_reference(c, chains, lambda);
    else if (wide32)
      all_ = whole_stack_reference<float>(c, chains, lambda);
    else
      all_ = whole_stack_reference<double>(c, chains, lambda);
    const std::vector<std::int64_t> d = p.widths();
    std::int64_t weights = 0;
    for (std::size_t l = 1; l < d.size(); ++l)
      weights = checked_add(weights, checked_mul(d[l], d[l - 1], "check flops"), "check flops");
    flops = checked_mul(checked_mul(weights, p.M, "check flops"), 12, "check flops");
    panel_bytes = checked_mul(
        checked_add(checked_mul(p.M, p.K + p.N, "check bytes"), weights, "check bytes"),
        static_cast<std::int64_t>(wide32 ? sizeof(float) : sizeof(double)), "check bytes");
  }
  if (wide32) return slice_stack<float>(c, t, b, std::get<ref::stack_expectation<float>>(all_));
  return slice_stack<double>(c, t, b, std::get<ref::stack_expectation<double>>(all_));
}

// --- a single layer's whole truth (audit, --dump) ---------------------------------------------

namespace {

// The case's whole inputs in T, from its seed.
template <class T>
void fill_inputs(const par::run_case& c, truth<T>& t) {
  const problem& p = c.prob;
  const bool out_in = p.layout == weight_layout::out_in;
  const auto M = static_cast<std::size_t>(p.M), N = static_cast<std::size_t>(p.N),
             K = static_cast<std::size_t>(p.K);
  (void)checked_mul(checked_mul(p.M + p.N, p.K, "inputs"), 8, "inputs bytes");
  (void)checked_mul(checked_mul(p.M, p.N, "Y"), 8, "Y bytes");
  const auto fill = [&](std::vector<T>& v, tensor_slot s, std::size_t rows, std::size_t cols) {
    v.assign(rows * cols, T(0));
    ref::fill_block<T>(c.mode, c.seed, par::data_id_of(s), 0, rows, 0, cols, v.data());
  };
  fill(t.x, {tensor::x, 0}, M, K);
  fill(t.w, {tensor::w, 0}, out_in ? N : K, out_in ? K : N);
  fill(t.dy, {tensor::dy, 0}, M, N);
}

// The outputs of t's inputs (filled): reference, oracle and magnitude, all in T.
template <class T>
void compute_outputs(const par::run_case& c, truth<T>& t) {
  const problem& p = c.prob;
  const bool out_in = p.layout == weight_layout::out_in;
  const auto M = static_cast<std::size_t>(p.M), N = static_cast<std::size_t>(p.N),
             K = static_cast<std::size_t>(p.K);
  const std::size_t rows[3] = {M, M, out_in ? N : K}, cols[3] = {N, K, out_in ? K : N};
  const char* names[3] = {"Y", "dX", "dW"};
  const std::int64_t k_ref[3] = {p.K, p.N, p.M};
  for (int i = 0; i < 3; ++i) {
    auto& o = t.out[i];
    o.name = names[i];
    o.rows = static_cast<std::int64_t>(rows[i]);
    o.cols = static_cast<std::int64_t>(cols[i]);
    o.k_ref = k_ref[i];
    o.reference.assign(rows[i] * cols[i], T(0));
    o.oracle.assign(rows[i] * cols[i], 0.0);
    o.magnitude.assign(rows[i] * cols[i], 0.0);
  }
  const weight_layout flipped = out_in ? weight_layout::in_out : weight_layout::out_in;
  // Y = X·Wᵀ (out_in) or X·W (in_out).
  ref::linear_forward<T>(p.layout, M, N, K, t.x.data(), t.w.data(), t.out[0].reference.data());
  ref::magnitude_forward<T>(p.layout, M, N, K, t.x.data(), t.w.data(), t.out[0].magnitude.data());
  ref::oracle_forward<T>(p.layout, M, N, K, t.x.data(), t.w.data(), t.out[0].oracle.data());
  // dX = dY·W (out_in, W as K-in × N-out of the flipped layout) or dY·Wᵀ (in_out).
  ref::linear_backward_dx<T>(p.layout, M, N, K, t.dy.data(), t.w.data(), t.out[1].reference.data());
  ref::magnitude_backward_dx<T>(p.layout, M, N, K, t.dy.data(), t.w.data(),
                                t.out[1].magnitude.data());
  ref::oracle_forward<T>(flipped, M, K, N, t.dy.data(), t.w.data(), t.out[1].oracle.data());
  // dW = dYᵀ·X (out_in: dYᵀ (N×M) times X as M-in × K-out) or Xᵀ·dY (in_out).
  ref::linear_backward_dw<T>(p.layout, M, N, K, t.dy.data(), t.x.data(), t.out[2].reference.data());
  ref::magnitude_backward_dw<T>(p.layout, M, N, K, t.dy.data(), t.x.data(),
                                t.out[2].magnitude.data());
  const auto transpose = [](const std::vector<T>& a, std::size_t r, std::size_t q) {
    std::vector<T> b(a.size());
    for (std::size_t i = 0; i < r; ++i)
      for (std::size_t j = 0; j < q; ++j) b[j * r + i] = a[i * q + j];
    return b;
  };
  if (out_in)
    ref::oracle_forward<T>(weight_layout::in_out, N, K, M, transpose(t.dy, M, N).data(), t.x.data(),
                           t.out[2].oracle.data());
  else
    ref::oracle_forward<T>(weight_layout::in_out, K, N, M, transpose(t.x, M, K).data(), t.dy.data(),
                           t.out[2].oracle.data());
  // The data-aware bound's squares, where it applies and no input value has a fixed sign.
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    const auto fixed = [&](const std::vector<T>& v) {
      return std::any_of(v.begin(), v.end(), [&](T e) { return ref::fixed_sign(c.mode, e); });
    };
    if (!data_aware_applies(c, false) || fixed(t.x) || fixed(t.w) || fixed(t.dy)) return;
    for (auto& o : t.out) o.squares.assign(o.magnitude.size(), 0.0);
    ref::magnitude_forward<T>(p.layout, M, N, K, t.x.data(), t.w.data(), t.out[0].squares.data(),
                              true);
    ref::magnitude_backward_dx<T>(p.layout, M, N, K, t.dy.data(), t.w.data(),
                                  t.out[1].squares.data(), true);
    ref::magnitude_backward_dw<T>(p.layout, M, N, K, t.dy.data(), t.x.data(),
                                  t.out[2].squares.data(), true);
  }
}

}  // namespace

template <class T>
truth<T> whole_truth(const par::run_case& c) {
  if (c.prob.layers() != 1)
    throw invalid_problem("the oracle is a single layer's; " + c.strategy + " runs a stack (H=)");
  truth<T> t;
  fill_inputs(c, t);
  if constexpr (is_16bit_v<T>) {
    // Widened to f32 (exact), the reference summed there (sgemm) and rounded to T once; the
    // oracle and the magnitudes of the same (exact) products.
    truth<float> w;
    const auto widen = [](const std::vector<T>& v) {
      std::vector<float> out(v.size());
      ref::widen<T>(v.data(), v.size(), out.data());
      return out;
    };
    w.x = widen(t.x);
    w.w = widen(t.w);
    w.dy = widen(t.dy);
    compute_outputs(c, w);
    for (int i = 0; i < 3; ++i) {
      auto& o = t.out[i];
      auto& wo = w.out[i];
      o.name = wo.name;
      o.rows = wo.rows;
      o.cols = wo.cols;
      o.k_ref = wo.k_ref;
      o.reference.resize(wo.reference.size());
      ref::narrow<T>(wo.reference.data(), wo.reference.size(), o.reference.data());
      o.unrounded = std::move(wo.reference);
      o.oracle = std::move(wo.oracle);
      o.magnitude = std::move(wo.magnitude);
    }
  } else {
    compute_outputs(c, t);
  }
  return t;
}

template truth<float> whole_truth<float>(const par::run_case&);
template truth<double> whole_truth<double>(const par::run_case&);
template truth<bfloat16_t> whole_truth<bfloat16_t>(const par::run_case&);
template truth<half_t> whole_truth<half_t>(const par::run_case&);

// --- the judge --------------------------------------------------------------------------------

template <class T>
judgement judge_block(const tolerance& tol, std::size_t rows, std::size_t cols, const T* got,
                      const wide_t<T>* want, const double* mag, const double* stat_bound,
                      const double* unit_mag) {
  judgement j;
  const std::size_t n = rows * cols;
  if (n == 0) return j;
  const double u = ref::unit_roundoff(tol.type);
  const bool stat_on = stat_bound != nullptr || (!tol.per_element && tol.tier.lambda > 0);
  const double* stat_mag = stat_bound != nullptr ? stat_bound : mag;
  // ref::element_bound's inflation for mag's own rounding (1 for a stack's bounds: k_mag 0), as
  // a bound per unit of mag, once per block.
  const double inflate = 1.0 - ref::gamma(tol.k_mag, dtype::f64);
  const auto per_mag = [&](double factor) -> double {
    return inflate > 0.0 ? factor / inflate : INFINITY;
  };
  const double rig_per_mag = per_mag(tol.rigorous), stat_per_mag = per_mag(tol.statistical);
  const auto bound_of = [](double per, double m) -> double { return m == 0.0 ? 0.0 : per * m; };
  const auto share = [](double err, double bound) {
    return err == 0 ? 0.0 : bound > 0 ? err / bound : INFINITY;
  };
  ref::compare_options nonfinite_rule;  // the non-finite branch of compare_block alone
  nonfinite_rule.bitwise = true;
  error_cell& w = j.worst;
  for (std::size_t i = 0; i < n; ++i) {
    const double g = static_cast<double>(static_cast<wide_t<T>>(got[i]));
    const double e = want[i];
    if (!std::isfinite(g) || !std::isfinite(e)) {
      bool fails = false;
      if constexpr (is_16bit_v<T>)
        fails = ref::compare_window<T>(1, 1, got + i, 1, want + i, 1, mag + i, 1, tol.rigorous,
                                       tol.k_mag, false)
                    .has_value();
      else
        fails = ref::compare_block<T>(1, 1, got + i, 1, want + i, 1, nullptr, 1, nonfinite_rule)
                    .has_value();
      if (fails) ++j.nonfinite;
      continue;
    }
    const double err = std::abs(g - e);
    j.max_err = std::max(j.max_err, err);
    if (unit_mag[i] > 0) w.err_u_mag = std::max(w.err_u_mag, err / (u * unit_mag[i]));
    if (tol.bitwise) continue;
    if constexpr (is_16bit_v<T>) {
      w.rigorous =
          std::max(w.rigorous, ref::window_share<T>(got[i], e, mag[i], tol.rigorous, tol.k_mag));
      if (stat_on)
        w.statistical = std::max(w.statistical, ref::window_share<T>(got[i], e, stat_mag[i],
                                                                     tol.statistical, tol.k_mag));
    } else {
      w.rigorous = std::max(w.rigorous, share(err, bound_of(rig_per_mag, mag[i])));
      if (stat_on)
        w.statistical = std::max(
            w.statistical,
            share(err, stat_bound != nullptr ? stat_bound[i] : bound_of(stat_per_mag, mag[i])));
    }
  }
  if constexpr (is_16bit_v<T>) {
    j.first = ref::compare_window<T>(rows, cols, got, cols, want, cols, mag, cols, tol.rigorous,
                                     tol.k_mag, tol.bitwise);
    if (!j.first && !tol.bitwise && stat_on) {
      j.first = ref::compare_window<T>(rows, cols, got, cols, want, cols, stat_mag, cols,
                                       tol.statistical, tol.k_mag, false);
      j.statistical = j.first.has_value();
      if (j.first && j.first->reason == "window") j.first->reason = "statistical";
    }
    if (j.first) j.reference = want[j.first->row * cols + j.first->col];
  } else {
    ref::compare_options opt;
    opt.bitwise = tol.bitwise;
    opt.mag_is_bound = tol.per_element;
    opt.k_par = tol.k_par;
    opt.k_ref = tol.k_ref;
    opt.k_mag = tol.k_mag;
    opt.lambda = tol.per_element ? 0 : tol.tier.lambda;
    opt.stat_bound = stat_bound;
    j.first = ref::compare_block<T>(rows, cols, got, cols, want, cols, mag, cols, opt);
    j.statistical = j.first && j.first->reason == "statistical";
    if (j.first) j.reference = j.first->expected;
  }
  return j;
}

template judgement judge_block<float>(const tolerance&, std::size_t, std::size_t, const float*,
                                      const float*, const double*, const double*, const double*);
template judgement judge_block<double>(const tolerance&, std::size_t, std::size_t, const double*,
                                       const double*, const double*, const double*, const double*);
template judgement judge_block<bfloat16_t>(const tolerance&, std::size_t, std::size_t,
                                           const bfloat16_t*, const float*, const double*,
                                           const double*, const double*);
template judgement judge_block<half_t>(const tolerance&, std::size_t, std::size_t, const half_t*,
                                       const float*, const double*, const double*, const double*);

bool settled(const any_matrix& got, const any_matrix& want) {
  if (got.index() != want.index() || par::rows_of(got) != par::rows_of(want) ||
      par::cols_of(got) != par::cols_of(want))
    return false;
  return std::visit(
      [&](const auto& g) {
        using T = typename std::decay_t<decltype(g.data)>::value_type;
        if constexpr (!std::is_same_v<T, float> && !std::is_same_v<T, double>) {
          return false;
        } else {
          const T* a = g.data.data();
          const T* b = std::get<matrix<T>>(want).data.data();
          bool finite = false, nonzero = false;
          for (std::size_t i = 0; i < g.data.size(); ++i) {
            if (std::memcmp(a + i, b + i, sizeof(T)) != 0 &&
                !(std::isnan(a[i]) && std::isnan(b[i])))
              return false;
            if (std::isfinite(a[i])) {
              finite = true;
              nonzero = nonzero || a[i] != T(0);
            }
          }
          return !finite || nonzero;
        }
      },
      got);
}

namespace {

// judge_block's judgement of a settled block (settled() holds), element for element what its
// loop and compare_block give with any magnitudes: every error is 0, so no element fails and every
// figure that a finite element enters is 0: err/(u·mag) where mag > 0 (some finite element is
// ≠ 0, so a product of its dot product is, and its magnitude with it), the rigorous share outside
// exact mode, the statistical share where its tier is on; -1 (none) where no element enters.
judgement settled_judgement(const tolerance& tol, const any_matrix& got) {
  const bool finite = std::visit(
      [](const auto& g) {
        return std::any_of(g.data.begin(), g.data.end(), [](const auto& v) {
          return std::isfinite(
              static_cast<double>(static_cast<wide_t<std::decay_t<decltype(v)>>>(v)));
        });
      },
      got);
  judgement j;
  if (!finite) return j;
  j.worst.err_u_mag = 0;
  if (tol.bitwise) return j;
  j.worst.rigorous = 0;
  if (tol.tier.lambda > 0) j.worst.statistical = 0;
  return j;
}

}  // namespace

std::vector<double> data_aware_bounds(const tolerance& tol, const block_reference& want) {
  std::vector<double> out;
  if (!tol.tier.data_aware() || want.sq.empty() || tol.per_element || tol.window || tol.bitwise)
    return out;
  const auto g64 = [](std::int64_t k) { return ref::gamma(k, dtype::f64); };
  // mag and sq were summed in double over k_mag terms (ref::element_bound's inflation); each
  // square term also rounds at its two squares and their product. The bound's own arithmetic:
  // at most 16 roundings in double, relative.
  const double in_mag = 1 - g64(tol.k_mag), in_sq = 1 - g64(tol.k_mag + 3), own = 1 - g64(16);
  if (!(in_sq > 0)) return out;
  const double g_par = ref::tier_gamma(tol.k_par, tol.type, tol.tier.lambda),
               g_ref = ref::tier_gamma(tol.k_ref, tol.type, tol.tier.lambda);
  const double la = tol.tier.lambda_a, ld = tol.tier.lambda_d;
  out.resize(want.sq.size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double m = want.mag[i] / in_mag, q = want.sq[i] / in_sq;
    const double b = std::min(g_par * m, ref::data_aware_bound(q, m, tol.k_par, tol.type, la, ld)) +
                     std::min(g_ref * m, ref::data_aware_bound(q, m, tol.k_ref, tol.type, la, ld));
    out[i] = b / own;
  }
  return out;
}

judgement judge_block(const tolerance& tol, const any_matrix& got, const block_reference& want) {
  if (want.mag.empty() && par::rows_of(got) * par::cols_of(got) > 0 && !tol.per_element &&
      !tol.window) {
    if (!settled(got, want.value))
      throw error(
          "judge_block: a reference without its magnitudes for a block not settled "
          "against it");
    return settled_judgement(tol, got);
  }
  return std::visit(
      [&](const auto& g) {
        using T = typename std::decay_t<decltype(g.data)>::value_type;
        const auto& w = std::get<matrix<wide_t<T>>>(want.value);
        const std::vector<double> aware = data_aware_bounds(tol, want);
        const std::vector<double>& sb = aware.empty() ? want.stat_bound : aware;
        return judge_block<T>(tol, g.rows, g.cols, g.data.data(), w.data.data(), want.mag.data(),
                              sb.empty() ? nullptr : sb.data(), want.unit_mag().data());
      },
      got);
}

std::string describe(const judgement& j, const tolerance& tol, const std::string& where) {
  if (!j.first) return {};
  const ref::mismatch& bad = *j.first;
  std::ostringstream os;
  os.precision(17);
  os << where << ": got " << bad.got << ", expected " << bad.expected;
  const std::string type(to_string(tol.type));
  if (tol.window) {
    os << " (the f32 reference " << j.reference << " rounded to " << type << ")";
    const double err = std::abs(bad.got - j.reference);
    if (tol.bitwise) {
      os << " (exact mode: bitwise equality required)";
    } else if (tol.per_element) {
      os.precision(3);
      os << ", " << (j.statistical ? "statistical " : "") << "stack window ±" << bad.bound
         << " around the f32 reference (" << to_string(tol.policy) << ", hidden tensors stored in "
         << type << "), error = " << (bad.bound > 0 ? err / bad.bound : INFINITY) << "·bound";
      if (j.statistical)
        os << " (λ = " << tol.tier.lambda << ", false-alarm probability " << tol.tier.p_fail << ")";
    } else {
      os << ", " << (j.statistical ? "statistical " : "") << "window ±" << bad.bound
         << " around the f32 reference (" << to_string(tol.policy) << ", k_par=" << tol.k_par
         << " of which reduced " << tol.k_red << ", k_ref=" << tol.k_ref
         << "), error = " << bad.ratio << "·u·mag";
      if (j.statistical)
        os << " = " << (bad.bound > 0 ? err / bad.bound : INFINITY)
           << "·bound (λ = " << tol.tier.lambda << ", false-alarm probability " << tol.tier.p_fail
           << ")";
    }
  } else if (tol.bitwise) {
    os << " (exact mode: bitwise equality required)";
  } else if (bad.reason == "statistical") {
    os.precision(3);
    os << ", statistical bound " << bad.bound << " (λ=" << tol.tier.lambda;
    if (tol.tier.data_aware())
      os << ", data-aware λ_a=" << tol.tier.lambda_a << ", λ_d=" << tol.tier.lambda_d;
    if (!tol.per_element) os << ", k_par=" << tol.k_par << ", k_ref=" << tol.k_ref;
    os << "), error = " << bad.ratio << "·bound; within the rigorous bound, above the "
       << "statistical one, which a correct kernel exceeds on a case with probability ≤ "
       << tol.tier.p_fail << " (independent mean-zero rounding errors"
       << (tol.tier.data_aware() ? "; the data's signs fair coins)" : ")");
  } else if (tol.per_element) {
    os << ", stack bound " << bad.bound << ", error = " << bad.ratio << "·bound";
  } else {
    os << ", bound " << bad.bound << " (k_par=" << tol.k_par << ", k_ref=" << tol.k_ref
       << "), error = " << bad.ratio << "·u·mag";
  }
  if (!bad.reason.empty()) os << " [" << bad.reason << "]";
  return os.str();
}

// --- the shape of the error -------------------------------------------------------------------

std::string_view to_string(error_shape s) {
  switch (s) {
    case error_shape::none: return "none";
    case error_shape::nonfinite: return "nonfinite";
    case error_shape::lost_nonfinite: return "lost_nonfinite";
    case error_shape::zero: return "zero";
    case error_shape::multiple: return "multiple";
    case error_shape::permuted: return "permuted";
    case error_shape::shifted: return "shifted";
    case error_shape::transposed: return "transposed";
    case error_shape::partial_only: return "partial_only";
    case error_shape::partial_missing: return "partial_missing";
    case error_shape::partial_twice: return "partial_twice";
    case error_shape::narrower: return "narrower";
    case error_shape::other: return "other";
  }
  return "?";
}

namespace {

// Whether element i of got is within `scale` times the judged bound of a candidate value `cand`
// (the reference with a shape applied): the judge's own test (bitwise, the bound per unit of mag,
// or a 16-bit window) with the candidate in place of the reference. NaN fits NaN, Inf the same Inf.
template <class T>
struct fit_test {
  const T* got;
  const double* mag;  // the bound's magnitudes (a stack's: the bound itself)
  double factor;      // the bound per unit of mag (a window's factor)
  double inflate;     // ref::element_bound's inflation for mag's own rounding
  std::int64_t k_mag;
  bool bitwise;

  [[nodiscard]] double value(std::size_t i) const {
    return static_cast<double>(static_cast<wide_t<T>>(got[i]));
  }
  [[nodiscard]] bool operator()(std::size_t i, double cand, double scale) const {
    return within(i, cand, scale, bitwise);
  }
  [[nodiscard]] bool within(std::size_t i, double cand, double scale, bool bits) const {
    const double g = value(i);
    if (!std::isfinite(g) || !std::isfinite(cand)) {
      if (std::isnan(g) || std::isnan(cand)) return std::isnan(g) && std::isnan(cand);
      return g == cand;
    }
    if constexpr (is_16bit_v<T>) {
      if (bits) return g == static_cast<double>(static_cast<float>(ref::round_nearest<T>(cand)));
      return ref::window_share<T>(got[i], cand, mag[i], factor * scale, k_mag) <= 1.0;
    } else {
      if (bits) return g == cand;
      if (!(inflate > 0.0)) return true;
      const double bound = mag[i] == 0.0 ? 0.0 : factor * scale * mag[i] / inflate;
      return std::abs(g - cand) <= bound;
    }
  }
};

// The runs of the set entries of `on`.
std::vector<par::index_run> runs_of(const std::vector<char>& on) {
  std::vector<par::index_run> out;
  for (std::size_t i = 0; i < on.size(); ++i) {
    if (on[i] == 0) continue;
    if (!out.empty() && out.back().offset + out.back().length == static_cast<std::int64_t>(i))
      ++out.back().length;
    else
      out.push_back({static_cast<std::int64_t>(i), 1});
  }
  return out;
}

// The shards of [0, ext) in n equal parts: shard s is [ext·s/n, ext·(s+1)/n).
std::size_t shard_lo(std::size_t ext, std::size_t n, std::size_t s) { return ext * s / n; }

}  // namespace

template <class T>
diagnosis diagnose_block(const tolerance& tol, bool statistical, std::size_t rows, std::size_t cols,
                         const T* got, const wide_t<T>* want, const double* mag,
                         const double* stat_bound, const diagnosis_context& ctx) {
  diagnosis d;
  const std::size_t n = rows * cols;
  d.elements = static_cast<std::int64_t>(n);
  const bool stat = statistical && !tol.bitwise;
  // An element's own statistical bound (a stack's, or the data-aware one): factor 1, inflated
  // already (a 16-bit stack's windows: its factor, 1).
  const bool own = stat && stat_bound != nullptr;
  const fit_test<T> fits{got,
                         own ? stat_bound : mag,
                         own    ? 1.0
                         : stat ? tol.statistical
                                : tol.rigorous,
                         own ? 1.0 : 1.0 - ref::gamma(tol.k_mag, dtype::f64),
                         own ? 0 : tol.k_mag,
                         tol.bitwise};
  const auto r_at = [&](std::size_t i) { return static_cast<double>(want[i]); };
  std::vector<std::size_t> bad;
  std::vector<char> bad_row(rows, 0), bad_col(cols, 0);
  for (std::size_t i = 0; i < n; ++i)
    if (!fits(i, r_at(i), 1.0)) {
      bad.push_back(i);
      bad_row[i / cols] = 1;
      bad_col[i % cols] = 1;
    }
  if (bad.empty()) return d;
  d.bad = static_cast<std::int64_t>(bad.size());
  d.rows = runs_of(bad_row);
  d.cols = runs_of(bad_col);
  const auto all_bad = [&](const auto& cand, double scale) {
    for (std::size_t i : bad)
      if (!fits(i, cand(i), scale)) return false;
    return true;
  };
  const auto done = [&](error_shape s) {
    d.shape = s;
    return d;
  };

  // NaN or Inf where the reference is finite; else a number (or Inf) where it is NaN, a number
  // where it is Inf (a product skipped).
  std::int64_t nans = 0, infs = 0, lost_nans = 0, lost_infs = 0;
  for (std::size_t i : bad) {
    const double g = fits.value(i), r = r_at(i);
    if (std::isfinite(r) && !std::isfinite(g)) ++(std::isnan(g) ? nans : infs);
    if (std::isnan(r) && !std::isnan(g)) ++lost_nans;
    if (std::isinf(r) && std::isfinite(g)) ++lost_infs;
  }
  for (const auto& [n_nan, n_inf, shape] :
       {std::tuple{nans, infs, error_shape::nonfinite},
        std::tuple{lost_nans, lost_infs, error_shape::lost_nonfinite}})
    if (n_nan + n_inf > 0) {
      d.detail = std::to_string(n_nan) + " NaN, " + std::to_string(n_inf) + " Inf";
      return done(shape);
    }
  if (all_bad([](std::size_t) { return 0.0; }, 1.0)) return done(error_shape::zero);
  for (int k = 2; k <= std::max(ctx.ranks, 2); ++k)
    if (all_bad([&](std::size_t i) { return k * r_at(i); }, k)) {
      d.k = k;
      return done(error_shape::multiple);
    }
  for (int k = 2; k <= std::max(ctx.ranks, 2); ++k)
    if (all_bad([&](std::size_t i) { return r_at(i) / k; }, 1.0)) {
      d.k = -k;
      return done(error_shape::multiple);
    }
  // Another rank's block, whole.
  for (const diagnosis_context::other& o : ctx.others) {
    if (o.value.size() != n) continue;
    bool all = true;
    for (std::size_t i = 0; i < n && all; ++i) all = fits(i, o.value[i], 1.0);
    if (!all) continue;
    d.rank = o.rank;
    if (o.rank < 0) d.detail = "holds " + o.what;
    return done(error_shape::permuted);
  }
  // The block's own shards in another order: along rows (stride cols) or columns (stride 1).
  std::vector<int> counts{2, 3, 4, 5, 6, 7, 8};
  counts.insert(counts.end(), ctx.shard_counts.begin(), ctx.shard_counts.end());
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  for (const bool along_rows : {true, false}) {
    const std::size_t ext = along_rows ? rows : cols, other = along_rows ? cols : rows;
    const std::vector<char>& bad_on = along_rows ? bad_row : bad_col;
    const auto at = [&](std::size_t a, std::size_t o) {
      return along_rows ? a * cols + o : o * cols + a;
    };
    // shard s of C equals shard q of R (or is zero: q = −1), element for element
    const auto holds = [&](std::size_t lo, std::size_t len, std::size_t qlo, bool zero) {
      for (std::size_t a = 0; a < len; ++a)
        for (std::size_t o = 0; o < other; ++o)
          if (!fits(at(lo + a, o), zero ? 0.0 : r_at(at(qlo + a, o)), 1.0)) return false;
      return true;
    };
    // A run of rows or columns reversed: the first to the last out-of-bound one.
    const auto first =
        static_cast<std::size_t>(std::find(bad_on.begin(), bad_on.end(), 1) - bad_on.begin());
    const auto last = static_cast<std::size_t>(
        ext - 1 -
        static_cast<std::size_t>(std::find(bad_on.rbegin(), bad_on.rend(), 1) - bad_on.rbegin()));
    if (last > first) {
      bool all = true;
      for (std::size_t a = first; a <= last && all; ++a)
        for (std::size_t o = 0; o < other && all; ++o)
          all = fits(at(a, o), r_at(at(first + last - a, o)), 1.0);
      if (all) {
        d.detail = std::string(along_rows ? "rows " : "columns ") + std::to_string(first) + "-" +
                   std::to_string(last) + " reversed";
        return done(error_shape::permuted);
      }
    }
    // The shardings tried: the ranks' partition (count 0), then n equal shards.
    std::vector<std::pair<int, std::vector<std::size_t>>> shardings;
    {
      std::vector<std::size_t> cuts = along_rows ? ctx.row_cuts : ctx.col_cuts;
      cuts.push_back(0);
      cuts.push_back(ext);
      std::sort(cuts.begin(), cuts.end());
      cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
      if (cuts.size() > 2 && cuts.back() == ext) shardings.emplace_back(0, cuts);
    }
    for (const int count : counts) {
      const auto sc = static_cast<std::size_t>(count);
      if (count < 2 || sc > ext) continue;
      std::vector<std::size_t> lo;
      for (std::size_t s = 0; s <= sc; ++s) lo.push_back(shard_lo(ext, sc, s));
      shardings.emplace_back(count, lo);
    }
    for (const std::int64_t size : ctx.shard_sizes) {  // shards of a given size, the last shorter
      const auto z = static_cast<std::size_t>(size);
      if (size < 1 || z >= ext || ext / z > 64) continue;
      std::vector<std::size_t> lo;
      for (std::size_t at = 0; at < ext; at += z) lo.push_back(at);
      lo.push_back(ext);
      shardings.emplace_back(-static_cast<int>(size), lo);
    }
    for (const auto& [count, lo] : shardings) {
      const std::size_t sc = lo.size() - 1;
      if (count == 0) {  // the ranks' parts in another order, reassembled front to back
        std::vector<long> order;
        std::vector<char> used(sc, 0);
        std::size_t pos = 0;
        while (pos < ext) {
          long next = -2;
          for (std::size_t q = 0; q < sc && next == -2; ++q) {
            const std::size_t len = lo[q + 1] - lo[q];
            if (used[q] == 0 && pos + len <= ext && holds(pos, len, lo[q], false))
              next = static_cast<long>(q);
          }
          if (next == -2) break;
          used[static_cast<std::size_t>(next)] = 1;
          order.push_back(next);
          pos += lo[static_cast<std::size_t>(next) + 1] - lo[static_cast<std::size_t>(next)];
        }
        bool moved = false;
        for (std::size_t s = 0; s < order.size(); ++s)
          moved = moved || order[s] != static_cast<long>(s);
        if (pos == ext && moved) {
          bool rotated = order.size() > 1;
          for (const long step : {1L, -1L}) {
            bool all = true;
            const auto n = static_cast<long>(order.size());
            for (long s = 0; s < n; ++s)
              all = all && order[static_cast<std::size_t>(s)] == ((s + step) % n + n) % n;
            if (all) break;
            if (step == -1) rotated = false;
          }
          std::string text;
          for (const long q : order) text += (text.empty() ? "" : ", ") + std::to_string(q);
          d.detail = std::string(along_rows ? "row" : "column") +
                     " parts of the ranks' partition (" + std::to_string(sc) + ", at";
          for (std::size_t s = 0; s < sc; ++s) d.detail += " " + std::to_string(lo[s]);
          d.detail += ") in the order " + text;
          return done(rotated ? error_shape::shifted : error_shape::permuted);
        }
      }
      std::vector<long> from(sc, -2);  // -2: in bound, −1: zero, else the shard it holds
      bool ok = true, moved = false;
      for (std::size_t s = 0; s < sc && ok; ++s) {
        const std::size_t len = lo[s + 1] - lo[s];
        if (std::find(bad_on.begin() + static_cast<std::ptrdiff_t>(lo[s]),
                      bad_on.begin() + static_cast<std::ptrdiff_t>(lo[s + 1]),
                      1) == bad_on.begin() + static_cast<std::ptrdiff_t>(lo[s + 1]))
          continue;
        for (std::size_t q = 0; q < sc && from[s] == -2; ++q)
          if (q != s && lo[q + 1] - lo[q] == len && holds(lo[s], len, lo[q], false))
            from[s] = static_cast<long>(q);
        if (from[s] == -2 && holds(lo[s], len, 0, true)) from[s] = -1;
        ok = from[s] != -2;
        moved = moved || from[s] >= 0;
      }
      if (!ok || !moved) continue;
      // Every misplaced shard holds the one `step` before or after it (a pipeline lagging by
      // `step` micro-batches, a ring short by one), those with nothing to hold zero.
      long step = 0;
      bool rotated = true;
      std::string map;
      for (std::size_t s = 0; s < sc; ++s) {
        if (from[s] == -2) continue;
        if (from[s] >= 0) {
          const long by = from[s] - static_cast<long>(s);
          rotated = rotated && (step == 0 || by == step);
          step = by;
        }
        map += (map.empty() ? "" : ", ") + std::to_string(s) + "←" +
               (from[s] < 0 ? std::string("zero") : std::to_string(from[s]));
      }
      std::string shards;
      if (count == 0) {
        shards = "the ranks' partition, " + std::to_string(sc) + " at";
        for (std::size_t s = 0; s < sc; ++s) shards += " " + std::to_string(lo[s]);
      } else if (count < 0) {
        shards = std::to_string(sc) + " of " + std::to_string(-count);
      } else {
        shards =
            std::to_string(count) + " of " + std::to_string(ext / sc) + (ext % sc != 0 ? "+" : "");
      }
      d.detail = std::string(along_rows ? "row" : "column") + " shards (" + shards + "): " + map;
      if (rotated) d.k = static_cast<int>(step < 0 ? -step : step);
      return done(rotated ? error_shape::shifted : error_shape::permuted);
    }
  }
  if (rows == cols && rows > 1 &&
      all_bad([&](std::size_t i) { return r_at((i % cols) * cols + i / cols); }, 1.0))
    return done(error_shape::transposed);
  // One part's partial sum alone (every part tried first: on two parts, R − P0 is P1 alone),
  // missing or counted twice.
  const std::pair<error_shape, double> tries[] = {{error_shape::partial_only, 0.0},
                                                  {error_shape::partial_missing, -1.0},
                                                  {error_shape::partial_twice, 1.0}};
  for (const auto& [shape, sign] : tries)
    for (const diagnosis_context::part& p : ctx.partials) {
      if (p.value.size() != n) continue;
      const auto cand = [&](std::size_t i) {
        return sign == 0.0 ? p.value[i] : r_at(i) + sign * p.value[i];
      };
      if (!all_bad(cand, 1.0)) continue;
      d.part = p.index;
      d.parts = p.count;
      d.rank = p.rank;
      return done(shape);
    }
  // Within the bound recomputed for the chain rounding in a coarser dtype; only where that bound
  // is below the magnitude itself (a bound of |R|'s size would admit any value of its sign).
  const double u_base = tol.window ? std::max(ref::unit_roundoff(tol.policy.acc),
                                              ref::unit_roundoff(tol.policy.reduce))
                                   : ref::unit_roundoff(tol.type);
  for (const dtype narrow : {dtype::f32, dtype::f16, dtype::bf16}) {
    const double u_n = ref::unit_roundoff(narrow);
    if (u_n <= u_base) continue;
    // The factor per unit of mag (a stack's and a window's: scaled by the unit roundoffs' ratio).
    double factor = 0;
    if (!tol.window && !tol.per_element) {
      // f32: the whole chain summed in it (inputs rounded: 2 more); f16, bf16: only the inputs
      // and the reduced partial sums rounded to it (a chain of 16-bit sums admits near anything).
      const std::int64_t k = tol.k_par > 0 ? tol.k_par : tol.k_ref;
      const std::int64_t k_narrow = narrow == dtype::f32 ? k + 2 : tol.k_red + 2;
      factor = ref::gamma(k_narrow, narrow) + ref::gamma(k, tol.type) +
               (tol.bitwise ? 0.0 : ref::gamma(tol.k_ref, tol.type));
    } else if (tol.per_element && narrow != dtype::f32) {
      continue;  // a stack's bound has no chain to take apart
    } else {
      factor = fits.factor * u_n / u_base;
    }
    if (!(factor < 1.0) || factor <= fits.factor) continue;
    const double scale = fits.factor > 0 ? factor / fits.factor : 0;
    bool all = true;
    for (std::size_t i : bad) {
      if (fits.factor > 0) {
        all = fits.within(i, r_at(i), scale, false);
      } else {  // exact mode: the bound from scratch
        fit_test<T> f = fits;
        f.factor = factor;
        all = f.within(i, r_at(i), 1.0, false);
      }
      if (!all) break;
    }
    if (!all) continue;
    d.detail = std::string(to_string(narrow));
    return done(error_shape::narrower);
  }
  return done(error_shape::other);
}

template diagnosis diagnose_block<float>(const tolerance&, bool, std::size_t, std::size_t,
                                         const float*, const float*, const double*, const double*,
                                         const diagnosis_context&);
template diagnosis diagnose_block<double>(const tolerance&, bool, std::size_t, std::size_t,
                                          const double*, const double*, const double*,
                                          const double*, const diagnosis_context&);
template diagnosis diagnose_block<bfloat16_t>(const tolerance&, bool, std::size_t, std::size_t,
                                              const bfloat16_t*, const float*, const double*,
                                              const double*, const diagnosis_context&);
template diagnosis diagnose_block<half_t>(const tolerance&, bool, std::size_t, std::size_t,
                                          const half_t*, const float*, const double*, const double*,
                                          const diagnosis_context&);

diagnosis diagnose(const tolerance& tol, const judgement& j, const any_matrix& got,
                   const block_reference& want, const diagnosis_context& ctx) {
  return std::visit(
      [&](const auto& g) {
        using T = typename std::decay_t<decltype(g.data)>::value_type;
        const auto& w = std::get<matrix<wide_t<T>>>(want.value);
        const std::vector<double> aware = data_aware_bounds(tol, want);
        const std::vector<double>& sb = aware.empty() ? want.stat_bound : aware;
        return diagnose_block<T>(tol, j.statistical, g.rows, g.cols, g.data.data(), w.data.data(),
                                 want.mag.data(), sb.empty() ? nullptr : sb.data(), ctx);
      },
      got);
}

std::vector<double> values_of(const any_matrix& m) {
  return std::visit(
      [](const auto& v) {
        std::vector<double> out(v.data.size());
        for (std::size_t i = 0; i < out.size(); ++i)
          out[i] = static_cast<double>(
              static_cast<wide_t<typename std::decay_t<decltype(v.data)>::value_type>>(v.data[i]));
        return out;
      },
      m);
}

namespace {

// "0-7, 12, 14-15" in global indices (runs of local ones mapped through the block's runs), at
// most four runs.
std::string global_runs(const std::vector<par::index_run>& local,
                        const std::vector<par::index_run>& map) {
  std::vector<par::index_run> global;
  for (const par::index_run& r : local)
    for (std::int64_t i = r.offset; i < r.offset + r.length; ++i) {
      const std::int64_t g = par::global_index(map, i);
      if (!global.empty() && global.back().offset + global.back().length == g)
        ++global.back().length;
      else
        global.push_back({g, 1});
    }
  std::string out;
  for (std::size_t i = 0; i < global.size(); ++i) {
    if (i == 4) return out + ", …";
    if (i > 0) out += ", ";
    out += std::to_string(global[i].offset);
    if (global[i].length > 1) {
      out += '-';
      out += std::to_string(global[i].offset + global[i].length - 1);
    }
  }
  return out;
}

}  // namespace

std::string describe(const diagnosis& d, const par::block& b) {
  if (d.shape == error_shape::none) return {};
  std::string what;
  const std::string part =
      d.rank >= 0 ? "P" + std::to_string(d.rank) + " (rank " + std::to_string(d.rank) +
                        "'s partial sum, over its share of the inner dimension)"
                  : "P" + std::to_string(d.part) + " (the sum over part " + std::to_string(d.part) +
                        " of " + std::to_string(d.parts) + " equal parts of the inner dimension)";
  switch (d.shape) {
    case error_shape::nonfinite:
      what = "NaN or Inf where the reference is finite (" + d.detail + ")";
      break;
    case error_shape::zero:
      what = "0 where out of bound (a block dropped or left untouched)";
      break;
    case error_shape::multiple:
      what = d.k > 0
                 ? std::to_string(d.k) + "·reference where out of bound (a sum counted " +
                       std::to_string(d.k) + " times)"
                 : "reference/" + std::to_string(-d.k) + " where out of bound (a sum divided by " +
                       std::to_string(-d.k) + ": averaged over the wrong group?)";
      break;
    case error_shape::permuted:
    case error_shape::shifted:
      if (d.rank >= 0)
        what = "holds rank " + std::to_string(d.rank) + "'s block";
      else if (d.shape == error_shape::shifted)
        what = d.detail + (d.k > 1 ? " (shifted by " + std::to_string(d.k) + " shards)"
                                   : std::string(" (shifted by one shard)"));
      else if (d.detail.find("←") != std::string::npos)
        what = d.detail + " (shard ← the shard it holds)";
      else
        what = d.detail;
      break;
    case error_shape::lost_nonfinite:
      what = "the reference's " + d.detail +
             " lost (a product skipped: 0·Inf or a NaN input never reached the sum)";
      break;
    case error_shape::transposed: what = "the reference transposed"; break;
    case error_shape::partial_only:
      what = part + " alone: the other parts' partial sums missing (a reduction skipped)";
      break;
    case error_shape::partial_missing:
      what = "reference − " + part + ": that part's partial sum missing";
      break;
    case error_shape::partial_twice:
      what = "reference + " + part + ": that part's partial sum counted twice";
      break;
    case error_shape::narrower:
      what = "within the bound of a chain rounded in " + d.detail +
             " (partial sums or inputs rounded to " + d.detail + ")";
      break;
    case error_shape::other:
    case error_shape::none: what = "none of the known shapes fits"; break;
  }
  return "shape: " + std::string(to_string(d.shape)) + ", " + what +
         "; out of bound: " + std::to_string(d.bad) + " of " + std::to_string(d.elements) +
         " elements, rows " + global_runs(d.rows, par::runs_of_rows(b)) + ", columns " +
         global_runs(d.cols, par::runs_of_cols(b));
}

std::string shape_named(std::string_view message) {
  const std::size_t at = message.find("; shape: ");
  if (at == std::string_view::npos) return {};
  const std::size_t from = at + 9, end = message.find_first_of(", ;(", from);
  return std::string(message.substr(from, end == std::string_view::npos ? end : end - from));
}

// --- shares against the oracle ----------------------------------------------------------------

double data_aware_share(const std::vector<double>& got, const std::vector<double>& oracle,
                        const std::vector<double>& mag, const std::vector<double>& squares,
                        std::int64_t k, dtype t) {
  if (squares.empty() || squares.size() != oracle.size() || got.size() != oracle.size()) return -1;
  const auto g64 = [](std::int64_t n) { return ref::gamma(n, dtype::f64); };
  const auto n = static_cast<double>(oracle.size());
  const double la = ref::lambda_for(n, ref::statistical_p_fail / 2, 0),
               ld = ref::lambda_for(n * static_cast<double>(std::max<std::int64_t>(k - 1, 1)),
                                    ref::statistical_p_fail / 2, 0);
  const double ud = ref::unit_roundoff(dtype::f64);
  // mag and the squares were summed in double over the contraction (at most k_mag ≤ 2^31 terms).
  const double in_mag = 1 - g64(k), in_sq = 1 - g64(k + 3);
  double worst = 0;
  for (std::size_t i = 0; i < oracle.size(); ++i) {
    if (!std::isfinite(got[i])) continue;
    const double err = std::abs(got[i] - oracle[i]);
    const double m = mag[i] / in_mag;
    const double b = ref::data_aware_bound(squares[i] / in_sq, m, k, t, la, ld) + ud * m;
    worst = std::max(worst, err == 0 ? 0.0 : b > 0 ? err / b : INFINITY);
  }
  return worst;
}

oracle_shares oracle_shares_of(double max_u_mag, std::int64_t k, std::int64_t elements, dtype t) {
  const double u = ref::unit_roundoff(t), ud = ref::unit_roundoff(dtype::f64);
  oracle_shares s;
  const double events = std::max(1.0, static_cast<double>(elements) * static_cast<double>(k));
  s.lambda = ref::lambda_for(events, ref::statistical_p_fail, u);
  const double allowed_rig = ref::gamma(k, t) + ud,
               allowed_stat = ref::gamma_tilde(k, u, s.lambda) + ud;
  s.rigorous = max_u_mag * u / allowed_rig;
  s.statistical = max_u_mag * u / allowed_stat;
  return s;
}

namespace {

template <class T>
oracle_shares window_shares(const std::vector<double>& got, const std::vector<double>& oracle,
                            const std::vector<double>& mag, std::int64_t k_loc, std::int64_t k_red,
                            std::int64_t k_mag, dtype storage,
                            const std::optional<precision>& policy) {
  const double ud = ref::unit_roundoff(dtype::f64);
  const std::int64_t k = std::max<std::int64_t>(k_loc + k_red, 1);
  const double u =
      policy ? std::max(ref::unit_roundoff(policy->acc), ref::unit_roundoff(policy->reduce))
             : ref::unit_roundoff(dtype::f32);
  oracle_shares s;
  const double events = std::max(1.0, static_cast<double>(oracle.size()) * static_cast<double>(k));
  s.lambda = ref::lambda_for(events, ref::statistical_p_fail, u);
  const double f_rig =
      (policy ? ref::policy_factor(k_loc, k_red, storage, *policy) : ref::gamma(k, dtype::f32)) +
      ud;
  const double f_stat =
      (policy ? ref::policy_factor_statistical(k_loc, k_red, storage, *policy, s.lambda)
              : ref::gamma_tilde(k, ref::unit_roundoff(dtype::f32), s.lambda)) +
      ud;
  for (std::size_t i = 0; i < oracle.size(); ++i) {
    if (!std::isfinite(got[i]) || !std::isfinite(oracle[i])) continue;
    const T g = static_cast<T>(static_cast<float>(got[i]));  // a T's value: exact
    s.rigorous = std::max(s.rigorous, ref::window_share<T>(g, oracle[i], mag[i], f_rig, k_mag));
    s.statistical =
        std::max(s.statistical, ref::window_share<T>(g, oracle[i], mag[i], f_stat, k_mag));
  }
  return s;
}

}  // namespace

oracle_shares oracle_window_shares(const std::vector<double>& got,
                                   const std::vector<double>& oracle,
                                   const std::vector<double>& mag, std::int64_t k_loc,
                                   std::int64_t k_red, std::int64_t k_mag, dtype storage,
                                   const std::optional<precision>& policy) {
  return storage == dtype::bf16
             ? window_shares<bfloat16_t>(got, oracle, mag, k_loc, k_red, k_mag, storage, policy)
             : window_shares<half_t>(got, oracle, mag, k_loc, k_red, k_mag, storage, policy);
}

double tier_bound_in_u(std::int64_t k, dtype t, double lambda) {
  const double u = ref::unit_roundoff(t);
  return (lambda > 0 ? ref::gamma_tilde(k, u, lambda) : ref::gamma(k, t)) / u;
}

// --- the projection tier ----------------------------------------------------------------------

projection_tier projection_tier_of(const par::run_case& c,
                                   std::span<const par::chain_lengths> chains, bool forward,
                                   bool backward, bool claimed, bool partial_inputs) {
  projection_tier pt;
  const problem& p = c.prob;
  // Every rank's block of every judged output holds at most all of its rows.
  const double rows_y = static_cast<double>(p.M),
               rows_dw = static_cast<double>(p.layout == weight_layout::out_in ? p.N : p.K);
  pt.rows = static_cast<double>(c.p) * ((forward ? rows_y : 0) + (backward ? rows_y + rows_dw : 0));
  if (c.mode == value_mode::exact || !claimed || chains.empty() || pt.rows <= 0) return pt;
  const double half = ref::statistical_p_fail / 2, u = ref::unit_roundoff(p.type);
  const double events = statistical_events(c, chains, forward, backward);
  const bool aware = data_aware_applies(c, partial_inputs);
  // The elements' half: all to γ̃'s λ, or (data-aware) half of it, a quarter each to λ_a, λ_d.
  pt.lambda = ref::lambda_for(events, aware ? half / 2 : half, u);
  // The rows' root mean square over the m vectors: a χ²_m/m tail per row (ref::rms_lambda_for).
  pt.lambda_v = ref::rms_lambda_for(pt.rows, half, projection_vectors);
  pt.p_fail = ref::false_alarm(events, pt.lambda, u) +
              ref::rms_false_alarm(pt.rows, pt.lambda_v, projection_vectors);
  if (!aware) return pt;
  // The kernel's computation of every element of every rank's block, and its tree's nodes
  // (tier_of's count for one computation).
  const auto d = [](std::int64_t v) { return static_cast<double>(v); };
  double elements = 0, nodes = 0;
  const auto add = [&](double n, std::int64_t inner) {
    elements += n;
    nodes += n * d(std::max<std::int64_t>(inner - 1, 1));
  };
  if (forward) add(d(p.M) * d(p.N), p.K);
  if (backward) {
    add(d(p.M) * d(p.K), p.N);
    add(d(p.N) * d(p.K), p.M);
  }
  elements *= c.p;  // every rank's block may hold every element (replicas)
  nodes *= c.p;
  pt.lambda_a = ref::lambda_for(elements, half / 4, 0);
  pt.lambda_d = ref::lambda_for(nodes, half / 4, 0);
  pt.p_fail += ref::false_alarm(elements, pt.lambda_a, 0) + ref::false_alarm(nodes, pt.lambda_d, 0);
  return pt;
}

std::vector<double> projection_signs(const par::run_case& c, tensor t,
                                     std::span<const par::index_run> cols) {
  // A stream of its own per output: no input's data id (plan.cpp data_id_of) reaches it.
  const std::uint32_t stream = 0x70726f00u + static_cast<std::uint32_t>(t);
  std::vector<double> v;
  for (const par::index_run& r : cols)
    for (std::int64_t j = r.offset; j < r.offset + r.length; ++j)
      for (int q = 0; q < projection_vectors; ++q)
        v.push_back((ref::counter_hash(c.seed, stream, static_cast<std::uint64_t>(q),
                                       static_cast<std::uint64_t>(j)) >>
                     63) != 0
                        ? -1.0
                        : 1.0);
  return v;
}

namespace {
// The check's own rounding (compensated sums, project_columns / project_rows) for the row's
// inflated S and G: r within (2u + 2γ_q + 2γ_{2d+1}² + γ_C²)·S, g within (2u + γ_C²)·G.
double projection_own_rounding(double s, double g, std::int64_t cols, std::int64_t inner,
                               int parts) {
  const auto g64 = [](std::int64_t k) { return ref::gamma(k, dtype::f64); };
  const double u = ref::unit_roundoff(dtype::f64);
  return (2 * u + 2 * g64(parts) + 2 * g64(2 * inner + 1) * g64(2 * inner + 1) +
          g64(cols) * g64(cols)) *
             s +
         (2 * u + g64(cols) * g64(cols)) * g;
}
}  // namespace

double projection_data_aware_of(double sum_sq, double sum_mag, double max_mag, double sum_got,
                                std::int64_t cols, std::int64_t inner, int parts, std::int64_t k,
                                dtype t, const projection_tier& pt) {
  if (!(pt.lambda_a > 0) || !(pt.lambda_v > 0)) return INFINITY;
  const auto g64 = [](std::int64_t n) { return ref::gamma(n, dtype::f64); };
  // S, X and G as projection_bound_of inflates them; Q's terms also round at their two squares
  // and their product.
  const double inflate = 1 / (1 - g64(cols + inner + parts + 2)),
               inflate_q = 1 / (1 - g64(cols + inner + parts + 5));
  const double s = sum_mag * inflate, x = max_mag * inflate, g = sum_got * inflate;
  const double q = sum_sq * inflate_q;
  // ref::data_aware_bound of a "q" of Q and a "mag" of √(X·S) is the Minkowski form above; its
  // own arithmetic, as data_aware_bounds': 16 roundings in double.
  const double b = ref::data_aware_bound(q, std::sqrt(x * s), k, t, pt.lambda_a, pt.lambda_d);
  return pt.lambda_v * b / (1 - g64(16)) + projection_own_rounding(s, g, cols, inner, parts);
}

projection_bound projection_bound_of(double sum_mag, double max_mag, double sum_got,
                                     std::int64_t cols, std::int64_t inner, int parts, double gamma,
                                     double gamma_tilde, double lambda_v) {
  const auto g64 = [](std::int64_t k) { return ref::gamma(k, dtype::f64); };
  // Sums of nonnegative terms in double (over parts, then summed): each within γ_{C+d+q+2} of
  // its exact value, relative.
  const double inflate = 1 / (1 - g64(cols + inner + parts + 2));
  const double s = sum_mag * inflate, x = max_mag * inflate, g = sum_got * inflate;
  const double own = projection_own_rounding(s, g, cols, inner, parts);
  projection_bound b;
  b.rigorous = gamma * s + own;
  b.statistical = gamma_tilde > 0 && lambda_v > 0 ? lambda_v * gamma_tilde * std::sqrt(x * s) + own
                                                  : b.rigorous;
  return b;
}

namespace {

// Error-free transformations in double (Knuth's TwoSum; Dekker's TwoProduct with Veltkamp's
// split, no FMA needed). Sums and products are not contracted: GCC's ISO C++ mode compiles with
// -ffp-contract=off.
inline void two_sum(double a, double b, double& s, double& e) {
  s = a + b;
  const double bb = s - a;
  e = (a - (s - bb)) + (b - bb);
}
inline void split(double a, double& h, double& l) {
  const double c = 134217729.0 * a;  // 2^27 + 1
  h = c - (c - a);
  l = a - h;
}
inline void two_product(double a, double b, double& p, double& e) {
  p = a * b;
  double ah = 0, al = 0, bh = 0, bl = 0;
  split(a, ah, al);
  split(b, bh, bl);
  e = al * bl - (((p - ah * bh) - al * bh) - ah * bl);
}

// A panel read as P(index, k), k the inner index: element index·si + k·sk of `data`.
template <class S>
struct strided {
  const S* data;
  std::size_t si, sk;
};

// The number of sign vectors, as an index.
constexpr std::size_t nv = projection_vectors;

// The data-aware bound's sums beside the projection's (projection_sums::sq).
struct squares_of {
  value_mode mode = value_mode::uniform;
  std::vector<double> col, row;  // Σ_j w_jk² per k; Q_i per row
  std::vector<char> fixed;       // per k: some w_jk has a fixed sign (ref::fixed_sign)
};

// Per inner index k of panel q (C indices × d) and vector r: s_kr = Σ_j q_jk·v_rj as an
// unevaluated pair hi + lo (hi[k·m + r], lo[k·m + r]: Ogita, Rump & Oishi's Sum2 without its last
// rounding: the terms are exact, v = ±1, and |hi + lo − s_kr| ≤ γ_{C−1}²·a_k), a_k = Σ_j |q_jk|,
// mx_k = max_j |q_jk|; false when a value is not finite. The m vectors of one k are summed side by
// side (the innermost loop, independent chains).
template <class S>
bool project_columns(const strided<S>& q, std::size_t n, std::size_t d, const double* v,
                     std::vector<double>& hi, std::vector<double>& lo, std::vector<double>& a,
                     std::vector<double>& mx, squares_of* sq) {
  hi.assign(d * nv, 0.0);
  lo.assign(d * nv, 0.0);
  a.assign(d, 0.0);
  mx.assign(d, 0.0);
  bool finite = true;
  if (sq != nullptr) {  // Σ_j w_jk² and whether some w_jk has a fixed sign, per k
    sq->col.assign(d, 0.0);
    sq->fixed.assign(d, 0);
    for (std::size_t j = 0; j < n; ++j)
      for (std::size_t k = 0; k < d; ++k) {
        const S x = q.data[j * q.si + k * q.sk];
        sq->col[k] += static_cast<double>(x) * static_cast<double>(x);
        if (ref::fixed_sign(sq->mode, x)) sq->fixed[k] = 1;
      }
  }
  // In tiles of inner indices, so that a tile's pairs stay in cache while every index j passes.
  constexpr std::size_t tile = 32;
  for (std::size_t k0 = 0; k0 < d; k0 += tile) {
    const std::size_t k1 = std::min(d, k0 + tile);
    double* h = hi.data() + k0 * nv;
    double* l = lo.data() + k0 * nv;
    for (std::size_t j = 0; j < n; ++j) {
      const double* vj = v + j * nv;
      const S* xj = q.data + j * q.si;
      for (std::size_t k = k0; k < k1; ++k) {
        const auto x = static_cast<double>(xj[k * q.sk]);
        double* hk = h + (k - k0) * nv;
        double* lk = l + (k - k0) * nv;
        for (std::size_t r = 0; r < nv; ++r) {
          double e = 0;
          two_sum(hk[r], x * vj[r], hk[r], e);
          lk[r] += e;
        }
        a[k] += std::abs(x);
        mx[k] = std::max(mx[k], std::abs(x));
      }
    }
  }
  for (std::size_t k = 0; k < d && finite; ++k) finite = std::isfinite(a[k]);
  for (std::size_t e = 0; e < hi.size() && finite; ++e) finite = std::isfinite(hi[e]);
  return finite;
}

// One term x·y into the pair (p, c) of Dot2 (Ogita, Rump & Oishi): p the running sum, c the
// running sum of the errors.
inline void dot2_add(double x, double y, double& p, double& c) {
  double h = 0, r = 0, q = 0;
  two_product(x, y, h, r);
  two_sum(p, h, p, q);
  c += q + r;
}

// Per index i of panel l (R indices × d) and vector r: r_ir = Σ_k l_ik·(hi_kr + lo_kr) by Dot2
// over its 2d terms, rounded once (|r̂_ir − Σ_k l_ik·(hi_kr + lo_kr)| ≤ u·|r_ir| +
// γ_{2d+1}²·Σ_k |l_ik|(|hi_kr| + |lo_kr|)), S_i = Σ_k |l_ik|·a_k, X_i = Σ_k |l_ik|·mx_k.
template <class S>
void project_rows(const strided<S>& l, std::size_t n, std::size_t d, const std::vector<double>& hi,
                  const std::vector<double>& lo, const std::vector<double>& a,
                  const std::vector<double>& mx, std::vector<double>& r, std::vector<double>& sum,
                  std::vector<double>& xs, squares_of* sq) {
  r.assign(n * nv, 0.0);
  sum.assign(n, 0.0);
  xs.assign(n, 0.0);
  if (sq != nullptr) {  // Q_i = Σ_k a_ik²·Σ_j w_jk², +∞ where a fixed sign meets one
    sq->row.assign(n, 0.0);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t k = 0; k < d; ++k) {
        const S x = l.data[i * l.si + k * l.sk];
        const auto xd = static_cast<double>(x);
        sq->row[i] += xd * xd * sq->col[k];
        if (sq->fixed[k] != 0 && ref::fixed_sign(sq->mode, x))
          sq->row[i] = std::numeric_limits<double>::infinity();
      }
  }
  // In tiles of rows, each row's m pairs (p, c) side by side, so that a tile's stay in cache
  // while every inner index k passes.
  constexpr std::size_t tile = 16;
  std::vector<double> p(tile * nv), c(tile * nv);
  for (std::size_t i0 = 0; i0 < n; i0 += tile) {
    const std::size_t i1 = std::min(n, i0 + tile);
    std::fill(p.begin(), p.end(), 0.0);
    std::fill(c.begin(), c.end(), 0.0);
    for (std::size_t k = 0; k < d; ++k) {
      const double* h = hi.data() + k * nv;
      const double* o = lo.data() + k * nv;
      for (std::size_t i = i0; i < i1; ++i) {
        const auto x = static_cast<double>(l.data[i * l.si + k * l.sk]);
        double* pi = p.data() + (i - i0) * nv;
        double* ci = c.data() + (i - i0) * nv;
        for (std::size_t q = 0; q < nv; ++q) {
          dot2_add(x, h[q], pi[q], ci[q]);
          dot2_add(x, o[q], pi[q], ci[q]);
        }
        sum[i] += std::abs(x) * a[k];
        xs[i] += std::abs(x) * mx[k];
      }
    }
    for (std::size_t i = i0; i < i1; ++i)
      for (std::size_t q = 0; q < nv; ++q)
        r[i * nv + q] = p[(i - i0) * nv + q] + c[(i - i0) * nv + q];
  }
}

template <class S>
projection_sums sums_of(const par::run_case& c, tensor t, const block& b, par::index_run inner) {
  projection_sums out;
  const auto rows = static_cast<std::size_t>(b.rows), cols = static_cast<std::size_t>(b.cols);
  const auto d = static_cast<std::size_t>(inner.length);
  // Nominal: 2 per multiply-add of each vector's s and r and of S, X, as the reference's are
  // counted; the compensation's error-free transformations take about ten times as many
  // operations.
  out.flops = checked_mul(checked_mul(2 * (projection_vectors + 1), b.rows + b.cols, "check flops"),
                          inner.length, "check flops");
  out.panel_bytes = checked_mul(b.rows + b.cols, inner.length, "check bytes") *
                    static_cast<std::int64_t>(sizeof(S));
  out.r.assign(rows * nv, 0.0);
  out.sum.assign(rows, 0.0);
  out.max.assign(rows, 0.0);
  if (rows == 0 || cols == 0 || d == 0) return out;
  const std::vector<double> v = projection_signs(c, t, par::runs_of_cols(b));
  const auto panels = panels_of<S>(c, t, b, inner, [&](tensor u, const auto& r, const auto& q) {
    return case_values<S>(c, u, r, q);
  });
  const S* a = panels.first.data.data();
  const S* w = panels.second.data.data();
  // L(i, k) and Q(j, k) with B_ij = Σ_k L(i, k)·Q(j, k) (panels_of's layouts).
  const bool out_in = c.prob.layout == weight_layout::out_in;
  strided<S> l{a, d, 1}, q{w, d, 1};
  if (t == tensor::y) {
    if (!out_in) q = {w, 1, cols};  // W[inner, cols]
  } else if (t == tensor::dx) {
    if (out_in) q = {w, 1, cols};  // W[inner(N), cols(K)]
  } else if (out_in) {             // dY[inner, rows]ᵀ · X[inner, cols]
    l = {a, 1, rows};
    q = {w, 1, cols};
  } else {  // X[inner, rows]ᵀ · dY[inner, cols]
    l = {w, 1, rows};
    q = {a, 1, cols};
  }
  std::vector<double> hi, lo, sa, sm;
  squares_of squares{c.mode, {}, {}, {}};
  squares_of* sq = data_aware_applies(c, false) ? &squares : nullptr;
  if (sq != nullptr)  // Σ_j w_jk² and Q: 2 per multiply-add each
    out.flops += checked_mul(2 * (b.rows + b.cols), inner.length, "check flops");
  out.finite = project_columns(q, cols, d, v.data(), hi, lo, sa, sm, sq);
  if (!out.finite) return out;
  project_rows(l, rows, d, hi, lo, sa, sm, out.r, out.sum, out.max, sq);
  if (sq != nullptr) out.sq = std::move(squares.row);
  for (std::size_t i = 0; i < rows && out.finite; ++i) out.finite = std::isfinite(out.sum[i]);
  for (std::size_t e = 0; e < out.r.size() && out.finite; ++e) out.finite = std::isfinite(out.r[e]);
  return out;
}

template <class S>
projection_judgement judge_rows(const par::run_case& c, tensor t, const block& b,
                                const matrix<S>& got, const projection_sums& sums, int parts,
                                const tolerance& tol, const projection_tier& pt) {
  projection_judgement j;
  const auto rows = static_cast<std::size_t>(b.rows), cols = static_cast<std::size_t>(b.cols);
  const std::int64_t inner = inner_of(c.prob, t);
  j.flops = checked_mul(2 * (checked_mul(projection_vectors, b.rows, "check flops") + 3), b.cols,
                        "check flops");
  if (rows == 0 || cols == 0) return j;
  if (!sums.finite || sums.r.size() != rows * nv) {
    j.declined = true;
    return j;
  }
  // The kernel's block projected: g_ir = (B̂·v_r)_i (Sum2 of exact terms: within u·|g| +
  // γ_{C−1}²·G) and G_i = Σ_j |B̂_ij|.
  const std::vector<double> v = projection_signs(c, t, par::runs_of_cols(b));
  std::vector<double> g(rows * nv, 0.0), ga(rows, 0.0);
  for (std::size_t i = 0; i < rows; ++i) {
    const S* row = got.row(i);
    double gi[nv] = {}, gl[nv] = {};
    double ai = 0;
    for (std::size_t jj = 0; jj < cols; ++jj) {
      const auto x = static_cast<double>(row[jj]);
      const double* vj = v.data() + jj * nv;
      for (std::size_t q = 0; q < nv; ++q) {
        double e = 0;
        two_sum(gi[q], x * vj[q], gi[q], e);
        gl[q] += e;
      }
      ai += std::abs(x);
    }
    for (std::size_t q = 0; q < nv; ++q) g[i * nv + q] = gi[q] + gl[q];
    ga[i] = ai;
    if (!std::isfinite(ai)) {
      j.declined = true;
      return j;
    }
  }
  const double gam = ref::gamma(tol.k_par, tol.type);
  const double gam_t = pt.lambda > 0 ? ref::tier_gamma(tol.k_par, tol.type, pt.lambda) : 0;
  const bool aware = pt.lambda_a > 0 && sums.sq.size() == rows;
  const auto bound = [&](std::size_t i) {
    projection_bound pb = projection_bound_of(sums.sum[i], sums.max[i], ga[i], b.cols, inner, parts,
                                              gam, gam_t, pt.lambda_v);
    if (aware)
      pb.statistical = std::min(
          pb.statistical, projection_data_aware_of(sums.sq[i], sums.sum[i], sums.max[i], ga[i],
                                                   b.cols, inner, parts, tol.k_par, tol.type, pt));
    return pb;
  };
  // A row's errors: the largest over the vectors (and which), and their root mean square.
  struct row_error {
    double largest = 0, rms = 0;
    std::size_t at = 0;
  };
  const auto error_of = [&](std::size_t i) {
    row_error e;
    for (std::size_t q = 0; q < nv; ++q) {
      const double d = std::abs(g[i * nv + q] - sums.r[i * nv + q]);
      if (d > e.largest || q == 0) {
        e.largest = d;
        e.at = q;
      }
    }
    // Scaled by the largest, so that no square overflows.
    double squares = 0;
    for (std::size_t q = 0; q < nv && e.largest > 0; ++q) {
      const double d = std::abs(g[i * nv + q] - sums.r[i * nv + q]) / e.largest;
      squares += d * d;
    }
    e.rms = e.largest * std::sqrt(squares / static_cast<double>(nv));
    return e;
  };
  double worst_rig = -1, worst_stat = -1;
  std::int64_t at_rig = -1, at_stat = -1;
  for (std::size_t i = 0; i < rows; ++i) {
    const projection_bound pb = bound(i);
    const row_error e = error_of(i);
    const double rig = pb.rigorous > 0 ? e.largest / pb.rigorous : (e.largest > 0 ? INFINITY : 0);
    const double st = pb.statistical > 0 ? e.rms / pb.statistical : (e.rms > 0 ? INFINITY : 0);
    if (rig > worst_rig) {
      worst_rig = rig;
      at_rig = static_cast<std::int64_t>(i);
    }
    if (st > worst_stat) {
      worst_stat = st;
      at_stat = static_cast<std::int64_t>(i);
    }
  }
  j.worst.rigorous = worst_rig;
  if (pt.lambda > 0) j.worst.statistical = worst_stat;
  j.failed = worst_rig > 1 || (pt.lambda > 0 && worst_stat > 1);
  j.statistical = j.failed && worst_rig <= 1;
  j.row = j.statistical ? at_stat : at_rig;
  const auto i = static_cast<std::size_t>(j.row);
  const projection_bound pb = bound(i);
  const row_error e = error_of(i);
  j.err = e.rms;
  j.err_max = e.largest;
  j.vector = static_cast<int>(e.at);
  j.got = g[i * nv + e.at];
  j.expected = sums.r[i * nv + e.at];
  j.rigorous = pb.rigorous;
  j.stat_bound = pb.statistical;
  return j;
}

}  // namespace

projection_sums projection_sums_of(const par::run_case& c, tensor t, const block& b,
                                   par::index_run inner) {
  switch (c.prob.type) {
    case dtype::f32: return sums_of<float>(c, t, b, inner);
    case dtype::f64: return sums_of<double>(c, t, b, inner);
    case dtype::bf16:
    case dtype::f16: break;
  }
  throw error("projection_sums_of: a single layer in f32 or f64 only");
}

projection_judgement judge_projection(const par::run_case& c, tensor t, const block& b,
                                      const any_matrix& got, const projection_sums& sums, int parts,
                                      const tolerance& tol, const projection_tier& pt) {
  if (par::rows_of(got) != static_cast<std::size_t>(b.rows) ||
      par::cols_of(got) != static_cast<std::size_t>(b.cols))
    throw error("judge_projection: the block's values are not laid out as the block");
  projection_judgement j;
  if (const auto* f = std::get_if<matrix<float>>(&got))
    j = judge_rows<float>(c, t, b, *f, sums, parts, tol, pt);
  else if (const auto* f = std::get_if<matrix<double>>(&got))
    j = judge_rows<double>(c, t, b, *f, sums, parts, tol, pt);
  else
    throw error("judge_projection: a single layer in f32 or f64 only");
  j.flops += sums.flops;
  j.panel_bytes += sums.panel_bytes;
  return j;
}

projection_judgement project_block(const par::run_case& c, tensor t, const block& b,
                                   const any_matrix& got, const tolerance& tol,
                                   const projection_tier& pt) {
  return judge_projection(c, t, b, got, projection_sums_of(c, t, b, {0, inner_of(c.prob, t)}), 1,
                          tol, pt);
}

std::string describe(const projection_judgement& j, const tolerance& tol, const projection_tier& pt,
                     const std::string& block_where) {
  if (!j.failed) return {};
  std::ostringstream os;
  os.precision(17);
  os << block_where << ", projected on " << projection_vectors
     << " sign vectors v over the block's columns: on v_" << j.vector + 1
     << ", (got·v)_i = " << j.got << ", (A·(Wᵀ·v))_i = " << j.expected;
  os.precision(3);
  os << ", error " << j.err_max << " = " << (j.rigorous > 0 ? j.err_max / j.rigorous : INFINITY)
     << "·rigorous bound " << j.rigorous << " (k_par=" << tol.k_par << ")";
  if (pt.lambda > 0)
    os << "; over the " << projection_vectors << ", root mean square error " << j.err << " = "
       << (j.stat_bound > 0 ? j.err / j.stat_bound : INFINITY) << "·statistical bound "
       << j.stat_bound << " (λ=" << pt.lambda << ", λ_v=" << pt.lambda_v;
  if (pt.lambda > 0 && pt.lambda_a > 0)
    os << ", data-aware λ_a=" << pt.lambda_a << ", λ_d=" << pt.lambda_d;
  if (pt.lambda > 0) os << ", false-alarm probability ≤ " << pt.p_fail << ")";
  os << " [projection" << (j.statistical ? ", statistical" : "") << "]";
  return os.str();
}

template matrix<float> case_values<float>(const par::run_case&, tensor_slot,
                                          std::span<const par::index_run>,
                                          std::span<const par::index_run>);
template matrix<double> case_values<double>(const par::run_case&, tensor_slot,
                                            std::span<const par::index_run>,
                                            std::span<const par::index_run>);
template matrix<bfloat16_t> case_values<bfloat16_t>(const par::run_case&, tensor_slot,
                                                    std::span<const par::index_run>,
                                                    std::span<const par::index_run>);
template matrix<half_t> case_values<half_t>(const par::run_case&, tensor_slot,
                                            std::span<const par::index_run>,
                                            std::span<const par::index_run>);
template matrix<float> case_values<float>(const par::run_case&, tensor_slot, std::int64_t,
                                          std::int64_t, std::int64_t, std::int64_t);
template matrix<double> case_values<double>(const par::run_case&, tensor_slot, std::int64_t,
                                            std::int64_t, std::int64_t, std::int64_t);
template matrix<bfloat16_t> case_values<bfloat16_t>(const par::run_case&, tensor_slot, std::int64_t,
                                                    std::int64_t, std::int64_t, std::int64_t);
template matrix<half_t> case_values<half_t>(const par::run_case&, tensor_slot, std::int64_t,
                                            std::int64_t, std::int64_t, std::int64_t);

}  // namespace shardcheck::prop
