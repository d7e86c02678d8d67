#include "shardcheck/reference/bound.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace shardcheck::ref {

double unit_roundoff(dtype t) {
  switch (t) {
    case dtype::f32: return 0x1p-24;
    case dtype::f64: return 0x1p-53;
    case dtype::bf16: return 0x1p-8;
    case dtype::f16: return 0x1p-11;
  }
  return 0x1p-53;
}

double gamma(std::int64_t k, dtype t) {
  if (k <= 0) return 0.0;
  const double ku = static_cast<double>(k) * unit_roundoff(t);
  if (ku >= 1.0) return std::numeric_limits<double>::infinity();
  return ku / (1.0 - ku);
}

double element_bound(double mag, std::int64_t k_par, std::int64_t k_ref, dtype t,
                     std::int64_t k_mag, double lambda) {
  if (mag == 0.0) return 0.0;
  const double inflate = 1.0 - gamma(k_mag, dtype::f64);
  if (!(inflate > 0.0)) return std::numeric_limits<double>::infinity();
  return (tier_gamma(k_par, t, lambda) + tier_gamma(k_ref, t, lambda)) * mag / inflate;
}

double tier_gamma(std::int64_t k, dtype t, double lambda) {
  return lambda > 0 ? gamma_tilde(k, unit_roundoff(t), lambda) : gamma(k, t);
}

double gamma_tilde(std::int64_t k, double u, double lambda) {
  if (k <= 0) return 0.0;
  const double kd = static_cast<double>(k);
  const double e = lambda * std::sqrt(kd) * u + kd * u * u / (1.0 - u);
  if (!(e < 700.0)) return std::numeric_limits<double>::infinity();
  return std::expm1(e);
}

double data_aware_bound(double q, double mag, std::int64_t k, dtype t, double lambda_a,
                        double lambda_d) {
  if (q == 0.0 && mag == 0.0) return 0.0;
  const double g = gamma(k, t);
  if (!std::isfinite(g) || !std::isfinite(q)) return std::numeric_limits<double>::infinity();
  const double kd = static_cast<double>(std::max<std::int64_t>(k, 1));
  const double c = lambda_d * std::sqrt(q) + g * mag;
  return lambda_a * unit_roundoff(t) * std::sqrt(kd * c * c + q);
}

double lambda_for(double events, double p_fail, double u) {
  if (!(events >= 1.0)) events = 1.0;
  return std::sqrt(2.0 * std::log(2.0 * events / p_fail)) / (1.0 - u);
}

double rms_false_alarm(double events, double lambda, int m) {
  const double tau = lambda * lambda;
  if (!(tau > 1.0) || m < 1) return 1.0;
  if (!(events >= 1.0)) events = 1.0;
  return std::min(1.0, events * std::exp(-0.5 * m * (tau - 1.0 - std::log(tau))));
}
double rms_lambda_for(double events, double p_fail, int m) {
  if (!(p_fail > 0.0 && p_fail < 1.0) || m < 1)
    throw error("rms_lambda_for: a probability in (0, 1) and at least one vector");
  if (!(events >= 1.0)) events = 1.0;
  // τ − 1 − ln τ rises from 0 at τ = 1: bisect for the τ where it meets 2·ln(events/p)/m, then
  // step up until the probability holds (the bisection's last rounding).
  const double target = 2.0 * std::log(events / p_fail) / m;
  double lo = 1.0, hi = 2.0;
  while (hi - 1.0 - std::log(hi) < target) hi *= 2.0;
  // Until lo and hi are neighbouring doubles (at most about 64 halvings of a binade's range).
  for (double mid = 0.5 * (lo + hi); mid > lo && mid < hi; mid = 0.5 * (lo + hi))
    (mid - 1.0 - std::log(mid) < target ? lo : hi) = mid;
  double lambda = std::sqrt(hi);
  for (int i = 0; i < 64 && rms_false_alarm(events, lambda, m) > p_fail; ++i)
    lambda = std::nextafter(lambda, INFINITY);
  return lambda;
}
double false_alarm(double events, double lambda, double u) {
  const double q = lambda * (1.0 - u);
  return std::min(1.0, 2.0 * events * std::exp(-q * q / 2.0));
}

}  // namespace shardcheck::ref
