#include "shardcheck/reference/mixed.hpp"

#include <cmath>
#include <limits>
#include <utility>

#include "shardcheck/reference/bound.hpp"

namespace shardcheck::ref {

namespace {

template <class T>
std::uint16_t bits_of(T v) {
  return Eigen::numext::bit_cast<std::uint16_t>(v);
}

template <class T>
T from_bits(std::uint16_t b) {
  return Eigen::numext::bit_cast<T>(b);
}

// γ_k for unit roundoff u; +infinity once k·u ≥ 1.
double gamma_u(std::int64_t k, double u) {
  if (k <= 0) return 0.0;
  const double ku = static_cast<double>(k) * u;
  if (ku >= 1.0) return std::numeric_limits<double>::infinity();
  return ku / (1.0 - ku);
}

// f_par with g(k, u) the per-chain factor (γ_k or γ̃_k(λ)).
template <class G>
double factor_with(std::int64_t k_local, std::int64_t k_reduce, dtype storage, const precision& p,
                   G g) {
  validate_policy(storage, p);
  const double u_acc = unit_roundoff(p.acc), u_red = unit_roundoff(p.reduce);
  // Partials rounded from acc to a coarser reduce dtype before they travel.
  const double rho = k_reduce > 0 && u_red > u_acc ? u_red : 0.0;
  return (1.0 + g(k_local, u_acc)) * (1.0 + rho) * (1.0 + g(k_reduce, u_red)) - 1.0;
}

}  // namespace

std::int64_t exact_limit(dtype t) {
  switch (t) {
    case dtype::f32: return std::int64_t{1} << 18;
    case dtype::f64: return std::int64_t{1} << 47;
    case dtype::bf16: return 256;
    case dtype::f16: return 512;
  }
  return 0;
}

template <class T>
T next_down(T v) {
  const std::uint16_t b = bits_of(v);
  const float f = static_cast<float>(v);
  if (std::isnan(f) || f == -std::numeric_limits<float>::infinity()) return v;
  if (f == 0.0f) return from_bits<T>(0x8001);  // the negative subnormal of least magnitude
  return from_bits<T>(f > 0.0f ? b - 1 : b + 1);
}

template <class T>
T next_up(T v) {
  const std::uint16_t b = bits_of(v);
  const float f = static_cast<float>(v);
  if (std::isnan(f) || f == std::numeric_limits<float>::infinity()) return v;
  if (f == 0.0f) return from_bits<T>(0x0001);
  return from_bits<T>(f > 0.0f ? b + 1 : b - 1);
}

template <class T>
T round_down(double v) {
  T r = static_cast<T>(static_cast<float>(v));
  while (static_cast<double>(static_cast<float>(r)) > v) r = next_down(r);
  return r;
}

template <class T>
T round_up(double v) {
  T r = static_cast<T>(static_cast<float>(v));
  while (static_cast<double>(static_cast<float>(r)) < v) r = next_up(r);
  return r;
}

template <class T>
T round_nearest(double v) {
  const T lo = round_down<T>(v), hi = round_up<T>(v);
  if (bits_of(lo) == bits_of(hi)) return lo;
  double l = static_cast<float>(lo), h = static_cast<float>(hi);
  // Past the largest finite value, the infinity stands for the next power of two (IEEE 754's
  // overflow threshold is the midpoint between the largest finite value and it).
  if (std::isinf(h)) h = l + (l - static_cast<double>(static_cast<float>(next_down(lo))));
  if (std::isinf(l)) l = h - (static_cast<double>(static_cast<float>(next_up(hi))) - h);
  const double below = v - l, above = h - v;
  if (below != above) return below < above ? lo : hi;
  return (bits_of(lo) & 1) == 0 ? lo : hi;  // a tie: the even significand
}

template <class T>
void widen(const T* in, std::size_t n, float* out) {
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(in[i]);
}

template <class T>
void narrow(const float* in, std::size_t n, T* out) {
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<T>(in[i]);
}

double policy_factor(std::int64_t k_local, std::int64_t k_reduce, dtype storage,
                     const precision& p) {
  return factor_with(k_local, k_reduce, storage, p, gamma_u);
}

double policy_factor_statistical(std::int64_t k_local, std::int64_t k_reduce, dtype storage,
                                 const precision& p, double lambda) {
  return factor_with(k_local, k_reduce, storage, p,
                     [lambda](std::int64_t k, double u) { return gamma_tilde(k, u, lambda); });
}

// The window's ends around b: got = round(a) with |a − b| ≤ δ, and rounding to nearest is
// monotone, so got lies in [round(b − δ), round(b + δ)] (each end moved out by one double ulp
// for its own rounding).
template <class T>
std::pair<double, double> window_edges(double b, double delta) {
  return {static_cast<float>(round_nearest<T>(std::nextafter(b - delta, -INFINITY))),
          static_cast<float>(round_nearest<T>(std::nextafter(b + delta, INFINITY)))};
}

template <class T>
std::optional<mismatch> compare_window(std::size_t rows, std::size_t cols, const T* got,
                                       std::size_t ld_got, const float* b, std::size_t ld_b,
                                       const double* mag, std::size_t ld_mag, double factor,
                                       std::int64_t k_mag, bool bitwise) {
  const double u = unit_roundoff(dtype_of<T>());
  const double inflate = 1.0 - gamma(k_mag, dtype::f64);
  for (std::size_t i = 0; i < rows; ++i) {
    for (std::size_t j = 0; j < cols; ++j) {
      const T g = got[i * ld_got + j];
      const float e = b[i * ld_b + j];
      const T rounded = static_cast<T>(e);
      const double gd = static_cast<float>(g), m = mag != nullptr ? mag[i * ld_mag + j] : 0.0;
      mismatch mm{i, j, gd, static_cast<float>(rounded), 0.0, 0.0, {}};
      const double err = std::fabs(gd - static_cast<double>(e));
      const double ratio = err == 0.0 ? 0.0 : m == 0.0 ? INFINITY : err / (u * m);
      if (std::isnan(e) || std::isnan(gd)) {
        if (std::isnan(e) && std::isnan(gd)) continue;
        mm.ratio = INFINITY;
        mm.reason = "nonfinite";
        return mm;
      }
      if (bitwise) {
        if (bits_of(g) == bits_of(rounded)) continue;
        mm.ratio = ratio;
        mm.reason = "bitwise";
        return mm;
      }
      if (std::isinf(e)) {
        if (gd == static_cast<double>(e)) continue;
        mm.ratio = INFINITY;
        mm.reason = "nonfinite";
        return mm;
      }
      // A finite b: got within the window, which reaches ±inf only past the storage range.
      const double delta = m == 0.0 ? 0.0 : inflate > 0.0 ? factor * m / inflate : INFINITY;
      const auto [lo, hi] = window_edges<T>(static_cast<double>(e), delta);
      if (gd >= lo && gd <= hi) continue;
      mm.bound = delta;
      mm.ratio = std::isinf(gd) ? INFINITY : ratio;
      mm.reason = std::isinf(gd) ? "nonfinite" : "window";
      return mm;
    }
  }
  return std::nullopt;
}

template <class T>
double window_share(T got, double b, double mag, double factor, std::int64_t k_mag) {
  const double g = static_cast<float>(got), e = b;
  if (g == e) return 0.0;
  const double inflate = 1.0 - gamma(k_mag, dtype::f64);
  const double delta = mag == 0.0 ? 0.0 : inflate > 0.0 ? factor * mag / inflate : INFINITY;
  const auto [lo, hi] = window_edges<T>(e, delta);
  const double edge = g > e ? hi : lo;
  const double reach = std::fabs(edge - e);
  return reach > 0.0 ? std::fabs(g - e) / reach : INFINITY;
}

#define SHARDCHECK_MIXED_INSTANTIATE(T)                                                          \
  template T next_down<T>(T);                                                                    \
  template T next_up<T>(T);                                                                      \
  template T round_down<T>(double);                                                              \
  template T round_up<T>(double);                                                                \
  template T round_nearest<T>(double);                                                           \
  template void widen<T>(const T*, std::size_t, float*);                                         \
  template void narrow<T>(const float*, std::size_t, T*);                                        \
  template std::optional<mismatch> compare_window<T>(                                            \
      std::size_t, std::size_t, const T*, std::size_t, const float*, std::size_t, const double*, \
      std::size_t, double, std::int64_t, bool);                                                  \
  template double window_share<T>(T, double, double, double, std::int64_t);
SHARDCHECK_MIXED_INSTANTIATE(bfloat16_t)
SHARDCHECK_MIXED_INSTANTIATE(half_t)

}  // namespace shardcheck::ref
