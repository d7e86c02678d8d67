#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "shardcheck/reference/bound.hpp"

namespace shardcheck::ref {
namespace {

TEST(bound, unit_roundoff_is_half_an_ulp_of_one) {
  EXPECT_EQ(unit_roundoff(dtype::f32), std::ldexp(1.0, -24));
  EXPECT_EQ(unit_roundoff(dtype::f64), std::ldexp(1.0, -53));
}

TEST(bound, gamma_follows_the_definition) {
  EXPECT_EQ(gamma(0, dtype::f64), 0.0);
  for (dtype t : {dtype::f32, dtype::f64})
    for (std::int64_t k : {1, 2, 17, 1000, 1 << 20}) {
      const double ku = static_cast<double>(k) * unit_roundoff(t);
      EXPECT_DOUBLE_EQ(gamma(k, t), ku / (1 - ku));
      EXPECT_GT(gamma(k + 1, t), gamma(k, t));
    }
}

TEST(bound, gamma_is_infinite_once_ku_reaches_one) {
  const std::int64_t f32_limit = std::int64_t{1} << 24;
  const std::int64_t f64_limit = std::int64_t{1} << 53;
  EXPECT_TRUE(std::isfinite(gamma(f32_limit - 1, dtype::f32)));
  EXPECT_TRUE(std::isinf(gamma(f32_limit, dtype::f32)));
  EXPECT_TRUE(std::isinf(gamma(f32_limit + 1, dtype::f32)));
  EXPECT_TRUE(std::isfinite(gamma(f32_limit, dtype::f64)));
  EXPECT_TRUE(std::isinf(gamma(f64_limit, dtype::f64)));
  EXPECT_GT(gamma(f64_limit, dtype::f64), 0.0);
}

TEST(bound, element_bound_sums_both_gammas_and_inflates_for_mag) {
  const double mag = 3.5;
  const double raw = (gamma(100, dtype::f32) + gamma(40, dtype::f32)) * mag;
  const double b = element_bound(mag, 100, 40, dtype::f32, 40);
  EXPECT_GT(b, raw);
  EXPECT_DOUBLE_EQ(b, raw / (1 - gamma(40, dtype::f64)));
  EXPECT_EQ(element_bound(mag, 0, 0, dtype::f64, 0), 0.0);
}

TEST(bound, zero_magnitude_means_zero_bound_even_without_a_gamma) {
  EXPECT_EQ(element_bound(0.0, 5, 5, dtype::f64, 5), 0.0);
  EXPECT_EQ(element_bound(0.0, std::int64_t{1} << 30, 1, dtype::f32, 1), 0.0);
  EXPECT_TRUE(std::isinf(element_bound(1.0, std::int64_t{1} << 30, 1, dtype::f32, 1)));
}

TEST(bound, gamma_tilde_is_the_probabilistic_form) {
  const double u = 0x1p-24;
  EXPECT_EQ(gamma_tilde(0, u, 9.0), 0.0);
  // ≈ λ·√k·u, to first order: the rest is (λ√k u)²/2 and k·u².
  EXPECT_NEAR(gamma_tilde(16384, u, 9.4), 9.4 * 128 * u, 1e-4 * 9.4 * 128 * u);
  EXPECT_LT(gamma_tilde(16384, u, 9.4), gamma(16384, dtype::f32) / 10);
  EXPECT_TRUE(std::isinf(gamma_tilde(1 << 30, 0x1p-8, 9.0)));
}

// The projection tier's λ_v: the root mean square of m projected errors over `events` rows.
TEST(bound, rms_lambda_for_meets_its_false_alarm_probability) {
  const double lambda = rms_lambda_for(1e5, 5e-10, 8);
  EXPECT_NEAR(lambda, 3.42, 0.01);
  EXPECT_LE(rms_false_alarm(1e5, lambda, 8), 5e-10);
  EXPECT_GT(rms_false_alarm(1e5, std::nextafter(lambda, 0.0), 8), 5e-10 * (1 - 1e-9));
  EXPECT_LT(rms_lambda_for(1e5, 5e-10, 64), rms_lambda_for(1e5, 5e-10, 8));
  EXPECT_GT(rms_lambda_for(1e9, 5e-10, 8), lambda);
  EXPECT_EQ(rms_false_alarm(1e5, 1.0, 8), 1.0);
  // No λ meets a probability of 0 or 1, or no vector: refused rather than searched for.
  EXPECT_THROW((void)rms_lambda_for(1e5, 0.0, 8), error);
  EXPECT_THROW((void)rms_lambda_for(1e5, 1.0, 8), error);
  EXPECT_THROW((void)rms_lambda_for(1e5, 5e-10, 0), error);
  // Against Hoeffding's for one vector at the same budget: √(2·ln(2·events/p)).
  EXPECT_LT(2 * lambda, lambda_for(1e5, 5e-10, 0));
}

// The χ² domination it rests on, measured: m = 8 Rademacher projections of a fixed error row
// whose energy sits in a few entries (the least Gaussian case), their mean square over σ² beyond
// τ = 2.5, in 2·10⁵ draws, against the Chernoff bound exp(−(m/2)(τ − 1 − ln τ)) = 0.097.
TEST(bound, rms_projection_tail_is_within_its_bound) {
  const int m = 8;
  const std::vector<double> e{3.0, -1.0, 0.5, 2.0, 0.25};
  double sigma2 = 0;
  for (const double x : e) sigma2 += x * x;
  const double tau = 2.5;
  std::uint64_t state = 0x9e3779b97f4a7c15ull;
  const auto bit = [&] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return (state >> 40) & 1u;
  };
  const int draws = 200000;
  int beyond = 0;
  for (int n = 0; n < draws; ++n) {
    double squares = 0;
    for (int r = 0; r < m; ++r) {
      double z = 0;
      for (const double x : e) z += bit() != 0 ? x : -x;
      squares += z * z;
    }
    if (squares >= m * tau * sigma2) ++beyond;
  }
  const double bound = rms_false_alarm(1, std::sqrt(tau), m);
  EXPECT_NEAR(bound, 0.097, 0.001);
  EXPECT_LT(static_cast<double>(beyond) / draws, bound);
  EXPECT_GT(beyond, 0);  // the tail is reached: the comparison says something
}

TEST(bound, lambda_for_meets_its_false_alarm_probability) {
  const double u = 0x1p-24;
  const double lambda = lambda_for(1e10, 1e-9, u);
  EXPECT_NEAR(lambda, 9.42, 0.01);
  EXPECT_NEAR(false_alarm(1e10, lambda, u), 1e-9, 1e-12);
  EXPECT_GT(lambda_for(1e12, 1e-9, u), lambda);
  EXPECT_EQ(false_alarm(1e10, 0.0, u), 1.0);
}

// The data-aware bound (bound.hpp): λ_a·u·√(k·(λ_d·√q + γ_k·mag)² + q).
TEST(bound, data_aware_bound_follows_its_formula) {
  const double u = unit_roundoff(dtype::f64);
  const double want =
      7.0 * u * std::sqrt(100 * std::pow(10.0 * 2 + gamma(100, dtype::f64) * 10, 2) + 4);
  // Up to the two evaluations' own rounding in double (about a dozen operations each).
  EXPECT_NEAR(data_aware_bound(4, 10, 100, dtype::f64, 7.0, 10.0), want,
              2 * gamma(16, dtype::f64) * want);
  EXPECT_EQ(data_aware_bound(0, 0, 100, dtype::f32, 7.0, 10.0), 0.0);
  EXPECT_TRUE(std::isinf(data_aware_bound(INFINITY, 1, 100, dtype::f32, 7.0, 10.0)));
  EXPECT_TRUE(std::isinf(data_aware_bound(1, 1, 1 << 25, dtype::f32, 7.0, 10.0)));  // k·u ≥ 1
}

// On uniform data (E|t| = 1/4, E t² = 1/9 for a product of two U(−1, 1)) it is sharper than
// γ̃_k(λ)·mag for long sums, about √k·E|t|/(λ_d·√E t²), and looser for short ones: the tier takes
// the smaller.
TEST(bound, data_aware_bound_is_sharper_for_long_sums_of_signed_data) {
  const double lambda = 9.4, la = 7.0, ld = 10.0, u = unit_roundoff(dtype::f32);
  const auto both = [&](std::int64_t k) {
    const auto kd = static_cast<double>(k);
    return std::pair{gamma_tilde(k, u, lambda) * kd / 4,
                     data_aware_bound(kd / 9, kd / 4, k, dtype::f32, la, ld)};
  };
  const auto [old16k, new16k] = both(16384);
  EXPECT_GT(old16k / new16k, 5.0);
  const auto [old16, new16] = both(16);
  EXPECT_LT(old16, new16);
}

}  // namespace
}  // namespace shardcheck::ref
