#include "shardcheck/reference/stack.hpp"

#include <algorithm>
#include <cmath>

#include "shardcheck/reference/bound.hpp"
#include "shardcheck/reference/gemm.hpp"
#include "shardcheck/reference/mixed.hpp"

namespace shardcheck::ref {

stack_chains reference_chains(const stack_shape& s, std::int64_t rows) {
  stack_chains c;
  for (std::size_t l = 1; l <= s.layers(); ++l) {
    c.h.push_back(s.widths[l - 1]);
    c.da.push_back(s.widths[l]);
    c.dw.push_back(rows);
  }
  return c;
}

namespace {

// Why exact mode's sums of stack s could round at grid 2^−g in a significand of `digits` bits,
// or "" if they cannot: the largest magnitude of any partial sum, in units of its grid
// 2^{−g(L+1)}, must fit.
std::string exact_problem_at(const stack_shape& s, std::int64_t rows, int digits, int g) {
  const double limit = std::ldexp(1.0, digits);
  const std::size_t L = s.layers();
  auto product = [&](std::size_t from, std::size_t to) {  // Π d_j, from ≤ j ≤ to
    double p = 1;
    for (std::size_t j = from; j <= to && j <= L; ++j) p *= static_cast<double>(s.widths[j]);
    return p;
  };
  auto check = [&](const char* what, std::size_t l, double magnitude, int grid) -> std::string {
    if (magnitude * std::ldexp(1.0, grid) <= limit) return {};
    return std::string(what) + std::to_string(l) + " would need " +
           std::to_string(std::log2(magnitude) + grid) + " significant bits";
  };
  for (std::size_t l = 1; l <= L; ++l) {
    for (std::string bad :
         {check("H", l, product(0, l - 1), g * static_cast<int>(l + 1)),
          check("dA", l - 1, product(l, L), g * static_cast<int>(L - l + 2)),
          check("dW", l,
                static_cast<double>(rows) * product(l + 1, L) * (l >= 2 ? product(0, l - 2) : 1.0),
                g * static_cast<int>(L + 1))})
      if (!bad.empty()) return bad;
  }
  return {};
}

int digits_of(dtype t) {
  switch (t) {
    case dtype::f32: return 24;
    case dtype::f64: return 53;
    case dtype::bf16: return 8;
    case dtype::f16: return 11;
  }
  return 53;
}

}  // namespace

int exact_grid(const stack_shape& s, std::int64_t rows, int digits) {
  for (int g = exact_finest_grid; g >= 0; --g)
    if (exact_problem_at(s, rows, digits, g).empty()) return g;
  return -1;
}

int exact_grid_of(const problem& p) {
  return exact_grid({p.layout, p.widths(), p.act}, p.M, digits_of(p.type));
}

std::string exact_stack_problem(const stack_shape& s, std::int64_t rows, dtype t) {
  return exact_problem_at(s, rows, digits_of(t), t == dtype::f16 ? 1 : 0);
}

template <class T>
void activate(activation a, std::span<T> h) {
  if (a == activation::identity) return;
  for (T& v : h) v = v > T(0) || std::isnan(v) ? v : T(0);
}

template <class T>
void activate_backward(activation a, std::span<const T> h, std::span<T> g) {
  if (a == activation::identity) return;
  for (std::size_t i = 0; i < g.size(); ++i)
    g[i] = h[i] > T(0) ? g[i] : std::isnan(h[i]) ? h[i] : T(0);
}

template <class T>
void stack_forward(const stack_shape& s, std::size_t rows, const T* x, std::span<const T* const> ws,
                   T* y, std::vector<std::vector<T>>* hidden) {
  std::vector<T> a(x, x + rows * s.width(0)), h;
  for (std::size_t l = 1; l <= s.layers(); ++l) {
    const bool last = l == s.layers();
    h.assign(rows * s.width(l), T(0));
    linear_forward<T>(s.layout, rows, s.width(l), s.width(l - 1), a.data(), ws[l - 1],
                      last ? y : h.data());
    if (last) break;
    if (hidden != nullptr) hidden->push_back(h);
    activate<T>(s.act, h);
    a.swap(h);
  }
}

namespace {

// A computed quantity of both computations, per element: |par − ref| ≤ delta and
// |value_c| ≤ scale_c·mag (c = par, ref), all in double.
struct tracked {
  std::vector<double> delta, mag;
  double scale_par = 1, scale_ref = 1;
};

std::vector<double> axpy(double a, const std::vector<double>& x, std::vector<double> y) {
  for (std::size_t i = 0; i < y.size(); ++i) y[i] += a * x[i];
  return y;
}

template <class T>
std::vector<double> absolute(const T* p, std::size_t n) {
  std::vector<double> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = std::fabs(static_cast<double>(p[i]));
  return out;
}

// in through a product with a shared (exact) weight: apply(a, z) writes the product of a with
// |W| into z (n elements); gp, gr are the two computations' γ for it.
template <class Apply>
tracked through_weight(const tracked& in, std::size_t n, double gp, double gr, Apply apply) {
  tracked out{std::vector<double>(n), std::vector<double>(n), in.scale_par * (1 + gp),
              in.scale_ref * (1 + gr)};
  apply(in.mag.data(), out.mag.data());
  apply(in.delta.data(), out.delta.data());
  out.delta = axpy(gp * in.scale_par + gr * in.scale_ref, out.mag, std::move(out.delta));
  return out;
}

// Where the reference's pre-activation h is within delta of zero the two computations may take
// different branches of f: returns, per element, 0 certainly inactive, 1 certainly active,
// 2 uncertain.
// A non-finite h is certain: where the reference's pre-activation is ±Inf or NaN, so is the other
// computation's (which non-finite value a sum takes does not depend on its order, and the
// nonfinite property demands exactly that), so both take the same branch — the uncertain set would
// otherwise multiply an infinite bound by the zeros of masked elements (NaN bounds where both give
// 0).
int branch(activation a, double h, double delta) {
  if (a == activation::identity) return 1;
  if (std::isfinite(h) && delta > 0 && std::fabs(h) <= delta) return 2;
  return h > 0 ? 1 : std::isnan(h) ? 1 : 0;
}

// The smallest f32 value ≥ v and the largest ≤ v (v in double).
float f32_up(double v) {
  float f = static_cast<float>(v);
  if (static_cast<double>(f) < v) f = std::nextafter(f, INFINITY);
  return f;
}
float f32_down(double v) {
  float f = static_cast<float>(v);
  if (static_cast<double>(f) > v) f = std::nextafter(f, -INFINITY);
  return f;
}

// Rounds v (f32) to S in place and returns the bound on |round(par) − round(v)| for any f32 par
// with |par − v| ≤ d: round is monotone, so round(par) lies in [round(lo), round(hi)] for the f32
// values lo, hi bracketing v ± d (each end moved out by one double ulp for its own rounding).
// Example (bf16): v = 1.00390625 (halfway, rounds to 1), d = 2⁻²⁰: lo and hi round to 1 and
// 1.0078125, so the bound is 2⁻⁷; at v = 1.001 it is 0.
template <class S>
double round_tracked(float& v, double d) {
  const float r = static_cast<float>(static_cast<S>(v));
  if (!std::isfinite(v)) {  // NaN and ±Inf round to themselves
    v = r;
    return d;
  }
  if (!(d < INFINITY) || !std::isfinite(r)) {
    v = r;
    return INFINITY;
  }
  const float lo = f32_up(std::nextafter(static_cast<double>(v) - d, -INFINITY));
  const float hi = f32_down(std::nextafter(static_cast<double>(v) + d, INFINITY));
  const double r_lo = static_cast<float>(static_cast<S>(lo));
  const double r_hi = static_cast<float>(static_cast<S>(hi));
  v = r;
  return std::max(r_hi - static_cast<double>(r), static_cast<double>(r) - r_lo);
}

// A hidden tensor of a 16-bit stack stored in its dtype: values rounded in place, their tracked
// bound carried through the rounding (round_tracked, from the finished bound `d`), and each
// computation's magnitude widened for it: |round(v)| ≤ (1 + u)|v| + η, η half the least
// subnormal (bf16 2⁻¹³⁴, f16 2⁻²⁵).
template <class T>
void store_hidden(const stack_storage& st, std::vector<T>& v, const std::vector<double>& d,
                  tracked& trk) {
  if constexpr (std::is_same_v<T, float>) {
    const bool bf = st.storage == dtype::bf16;
    const double u = unit_roundoff(st.storage), eta = std::ldexp(1.0, bf ? -134 : -25);
    for (std::size_t i = 0; i < v.size(); ++i) {
      trk.delta[i] = bf ? round_tracked<bfloat16_t>(v[i], d[i]) : round_tracked<half_t>(v[i], d[i]);
      trk.mag[i] += eta;
    }
    trk.scale_par *= 1 + u;
    trk.scale_ref *= 1 + u;
  } else {
    (void)st, (void)v, (void)d, (void)trk;
  }
}

std::int64_t share(const std::vector<std::int64_t>& v, std::size_t i) {
  return i < v.size() ? v[i] : 0;
}

}  // namespace

template <class T>
stack_expectation<T> stack_expect(const stack_shape& s, std::size_t rows, const T* x,
                                  std::span<const T* const> ws, const T* dy,
                                  const stack_chains& par, dtype t, double lambda,
                                  const stack_storage* storage) {
  const std::size_t L = s.layers();
  const stack_chains ref = reference_chains(s, static_cast<std::int64_t>(rows));
  if (storage != nullptr && !std::is_same_v<T, float>)
    throw invalid_problem("stack_expect: a 16-bit stack is computed in float");
  // The parallel computation's factor for a chain of k additions, k_red of them across ranks.
  const auto par_gamma = [&](std::int64_t k, std::int64_t k_red) {
    if (storage == nullptr) return tier_gamma(k, t, lambda);
    const std::int64_t kr = std::clamp<std::int64_t>(k_red, 0, k);
    return lambda > 0
               ? policy_factor_statistical(k - kr, kr, storage->storage, storage->policy, lambda)
               : policy_factor(k - kr, kr, storage->storage, storage->policy);
  };
  // Every double product and update below rounds; together they stay within γ_kmag (double) of
  // the exact nonnegative values, so each bound is divided by (1 − γ_kmag).
  std::int64_t kmag = 8 * static_cast<std::int64_t>(L);
  for (std::size_t l = 1; l <= L; ++l)
    kmag += s.widths[l - 1] + s.widths[l] + static_cast<std::int64_t>(rows);
  const double inflate = 1.0 / (1.0 - gamma(kmag, dtype::f64));
  // A 16-bit stack's bound can pass the storage range (its magnitudes grow layer by layer): a
  // hidden element's bound is then infinite (round(ref + d) is inf), and an infinite bound times
  // a zero weight is NaN, which stands for "no bound" too: infinite.
  const auto no_bound_is_infinite = [&](std::vector<double>& d) {
    if (storage == nullptr) return;
    for (double& v : d)
      if (std::isnan(v)) v = INFINITY;
  };
  auto finish = [&](std::vector<double> d) {
    for (double& v : d) v *= inflate;
    no_bound_is_infinite(d);
    return d;
  };
  std::vector<std::vector<double>> abs_w;
  for (std::size_t l = 1; l <= L; ++l) abs_w.push_back(absolute(ws[l - 1], s.weight_size(l)));

  stack_expectation<T> e;
  // Forward: A_{l−1} as values and as tracked bounds, kept for dW.
  std::vector<std::vector<T>> a_val{std::vector<T>(x, x + rows * s.width(0))}, h_val;
  std::vector<tracked> a_trk{
      {std::vector<double>(rows * s.width(0), 0.0), absolute(x, rows * s.width(0)), 1, 1}};
  std::vector<std::vector<double>> h_delta;
  for (std::size_t l = 1; l <= L; ++l) {
    const auto dl = s.width(l), dp = s.width(l - 1);
    const tracked& in = a_trk.back();
    std::vector<T> h(rows * dl);
    linear_forward<T>(s.layout, rows, dl, dp, a_val.back().data(), ws[l - 1], h.data());
    tracked out =
        through_weight(in, rows * dl, par_gamma(par.h[l - 1], share(par.h_red, l - 1)),
                       tier_gamma(ref.h[l - 1], t, lambda), [&](const double* a, double* z) {
                         linear_forward<double>(s.layout, rows, dl, dp, a, abs_w[l - 1].data(), z);
                       });
    no_bound_is_infinite(out.delta);
    if (l == L) {
      e.y = std::move(h);
      e.y_bound = finish(std::move(out.delta));
      e.y_mag = std::move(out.mag);
      break;
    }
    // f is 1-Lipschitz with |f(h)| ≤ |h|: delta and mag carry over, except where both
    // computations certainly give 0.
    std::vector<double> hd = finish(out.delta);
    if (storage != nullptr) {  // H_l stored in the 16-bit dtype, then A_l = f(H_l)
      store_hidden(*storage, h, hd, out);
      hd = out.delta;
    }
    for (std::size_t i = 0; i < h.size(); ++i)
      if (branch(s.act, static_cast<double>(h[i]), hd[i]) == 0) out.delta[i] = out.mag[i] = 0;
    h_val.push_back(h);
    h_delta.push_back(std::move(hd));
    activate<T>(s.act, h);
    a_val.push_back(std::move(h));
    a_trk.push_back(std::move(out));
  }
  if (dy == nullptr) return e;

  // Backward: G = dH_l, tracked from dY (shared input: delta 0).
  std::vector<T> g(dy, dy + rows * s.width(L));
  tracked gt{std::vector<double>(g.size(), 0.0), absolute(dy, g.size()), 1, 1};
  e.dw.resize(L);
  e.dw_bound.resize(L);
  e.dw_mag.resize(L);
  for (std::size_t l = L; l >= 1; --l) {
    const auto dl = s.width(l), dp = s.width(l - 1), wn = s.weight_size(l);
    const tracked& at = a_trk[l - 1];
    // dW_l = dH_lᵀ·A_{l−1}: |g_p a_p − g_r a_r| ≤ |g_p − g_r||a_p| + |g_r||a_p − a_r|, plus each
    // computation's own rounding γ_c·|g_c||a_c|.
    e.dw[l - 1].assign(wn, T(0));
    linear_backward_dw<T>(s.layout, rows, dl, dp, g.data(), a_val[l - 1].data(),
                          e.dw[l - 1].data());
    std::vector<double> mm(wn), dm(wn), md(wn);
    linear_backward_dw<double>(s.layout, rows, dl, dp, gt.mag.data(), at.mag.data(), mm.data());
    linear_backward_dw<double>(s.layout, rows, dl, dp, gt.delta.data(), at.mag.data(), dm.data());
    linear_backward_dw<double>(s.layout, rows, dl, dp, gt.mag.data(), at.delta.data(), md.data());
    const double wp = par_gamma(par.dw[l - 1], share(par.dw_red, l - 1)),
                 wr = tier_gamma(ref.dw[l - 1], t, lambda);
    std::vector<double> b = axpy(at.scale_par, dm, std::vector<double>(wn, 0.0));
    b = axpy(gt.scale_ref, md, std::move(b));
    b = axpy(wp * gt.scale_par * at.scale_par + wr * gt.scale_ref * at.scale_ref, mm, std::move(b));
    e.dw_bound[l - 1] = finish(std::move(b));
    e.dw_mag[l - 1] = std::move(mm);

    // dA_{l−1} = dH_l·W_l (W_l shared: exact).
    std::vector<T> da(rows * dp);
    linear_backward_dx<T>(s.layout, rows, dl, dp, g.data(), ws[l - 1], da.data());
    tracked dt = through_weight(
        gt, da.size(), par_gamma(par.da[l - 1], share(par.da_red, l - 1)),
        tier_gamma(ref.da[l - 1], t, lambda), [&](const double* a, double* z) {
          linear_backward_dx<double>(s.layout, rows, dl, dp, a, abs_w[l - 1].data(), z);
        });
    if (l == 1) {
      e.dx = std::move(da);
      e.dx_bound = finish(std::move(dt.delta));
      e.dx_mag = std::move(dt.mag);
      break;
    }
    if (storage != nullptr) store_hidden(*storage, da, finish(dt.delta), dt);  // dA_{l−1} stored
    // Through f'(H_{l−1}): where the branch is uncertain one computation may pass dA and the
    // other 0, so they differ by up to the larger |dA_c|.
    const std::vector<T>& h = h_val[l - 2];
    const std::vector<double>& hd = h_delta[l - 2];
    const double big = std::max(dt.scale_par, dt.scale_ref);
    for (std::size_t i = 0; i < da.size(); ++i) {
      const int br = branch(s.act, static_cast<double>(h[i]), hd[i]);
      if (br == 0) dt.delta[i] = dt.mag[i] = 0;
      if (br == 2) dt.delta[i] = std::max(dt.delta[i], big * dt.mag[i]);
    }
    activate_backward<T>(s.act, std::span<const T>(h), std::span<T>(da));
    g = std::move(da);
    gt = std::move(dt);
  }
  return e;
}

#define SHARDCHECK_STACK_INSTANTIATE(T)                                                        \
  template void activate<T>(activation, std::span<T>);                                         \
  template void activate_backward<T>(activation, std::span<const T>, std::span<T>);            \
  template void stack_forward<T>(const stack_shape&, std::size_t, const T*,                    \
                                 std::span<const T* const>, T*, std::vector<std::vector<T>>*); \
  template stack_expectation<T> stack_expect<T>(                                               \
      const stack_shape&, std::size_t, const T*, std::span<const T* const>, const T*,          \
      const stack_chains&, dtype, double, const stack_storage*);
SHARDCHECK_STACK_INSTANTIATE(float)
SHARDCHECK_STACK_INSTANTIATE(double)
#undef SHARDCHECK_STACK_INSTANTIATE

}  // namespace shardcheck::ref
