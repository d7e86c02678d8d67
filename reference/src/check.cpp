#include "shardcheck/reference/check.hpp"

#include <bit>
#include <cmath>
#include <limits>

#include "shardcheck/reference/bound.hpp"

namespace shardcheck::ref {

namespace {

template <class T>
bool same_bits(T a, T b) {
  if constexpr (sizeof(T) == 4)
    return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
  else
    return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);
}

double ratio_of(double err, double u, double mag) {
  if (err == 0.0) return 0.0;
  if (mag == 0.0) return std::numeric_limits<double>::infinity();
  return err / (u * mag);
}

}  // namespace

template <class T>
std::optional<mismatch> compare_block(std::size_t rows, std::size_t cols, const T* got,
                                      std::size_t ld_got, const T* expected, std::size_t ld_exp,
                                      const double* mag, std::size_t ld_mag,
                                      const compare_options& opt) {
  constexpr dtype t = dtype_of<T>();
  const double u = unit_roundoff(t);
  if (mag == nullptr && !opt.bitwise && rows > 0 && cols > 0)
    throw error("compare_block: mag is required unless bitwise");
  const bool statistical = opt.stat_bound != nullptr || (!opt.mag_is_bound && opt.lambda > 0);
  std::optional<mismatch> first_statistical;
  // element_bound's factors, once per block (mag == 0 gives 0 through them as through it).
  const double inflate = 1.0 - gamma(opt.k_mag, dtype::f64);
  const double g_rig = gamma(opt.k_par, t) + gamma(opt.k_ref, t);
  const double g_stat =
      statistical && opt.stat_bound == nullptr
          ? tier_gamma(opt.k_par, t, opt.lambda) + tier_gamma(opt.k_ref, t, opt.lambda)
          : 0.0;
  const auto bound_of = [&](double g, double m) {
    if (m == 0.0) return 0.0;
    if (!(inflate > 0.0)) return std::numeric_limits<double>::infinity();
    return g * m / inflate;
  };
  for (std::size_t i = 0; i < rows; ++i) {
    for (std::size_t j = 0; j < cols; ++j) {
      const T g = got[i * ld_got + j];
      const T e = expected[i * ld_exp + j];
      const double m = mag != nullptr ? mag[i * ld_mag + j] : 0.0;
      mismatch mm{i, j, static_cast<double>(g), static_cast<double>(e), 0.0, 0.0, {}};
      if (std::isnan(e) || std::isinf(e) || !std::isfinite(g)) {
        const bool ok = std::isnan(e) ? std::isnan(g) : g == e;
        if (ok) continue;
        mm.ratio = std::numeric_limits<double>::infinity();
        mm.reason = "nonfinite";
        return mm;
      }
      const double err = std::fabs(static_cast<double>(g) - static_cast<double>(e));
      if (opt.bitwise) {
        if (same_bits(g, e)) continue;
        mm.ratio = ratio_of(err, u, m);
        mm.reason = "bitwise";
        return mm;
      }
      mm.bound = opt.mag_is_bound ? m : bound_of(g_rig, m);
      if (err <= mm.bound) {
        if (!statistical || first_statistical) continue;
        const double sb =
            opt.stat_bound != nullptr ? opt.stat_bound[i * ld_mag + j] : bound_of(g_stat, m);
        if (err <= sb) continue;
        mm.bound = sb;
        mm.ratio = err / sb;
        mm.reason = "statistical";
        first_statistical = mm;
        continue;
      }
      mm.ratio = opt.mag_is_bound ? err / m : ratio_of(err, u, m);
      mm.reason = "value";
      return mm;
    }
  }
  return first_statistical;
}

template std::optional<mismatch> compare_block<float>(std::size_t, std::size_t, const float*,
                                                      std::size_t, const float*, std::size_t,
                                                      const double*, std::size_t,
                                                      const compare_options&);
template std::optional<mismatch> compare_block<double>(std::size_t, std::size_t, const double*,
                                                       std::size_t, const double*, std::size_t,
                                                       const double*, std::size_t,
                                                       const compare_options&);

}  // namespace shardcheck::ref
