#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "naive.hpp"
#include "shardcheck/reference/bound.hpp"
#include "shardcheck/reference/gemm.hpp"
#include "shardcheck/reference/oracle.hpp"

namespace shardcheck::ref::test {
namespace {

template <class T>
class oracle_test : public ::testing::Test {};
using element_types = ::testing::Types<float, double>;
TYPED_TEST_SUITE(oracle_test, element_types);

std::vector<shape> oracle_shapes() {
  auto all = shapes();
  all.push_back({3, 4, 4099});
  return all;
}

TYPED_TEST(oracle_test, exact_mode_equals_naive_loop) {
  using T = TypeParam;
  for (weight_layout l : layouts)
    for (shape s : shapes()) {
      SCOPED_TRACE(std::string(to_string(l)) + " M=" + std::to_string(s.m) +
                   " N=" + std::to_string(s.n) + " K=" + std::to_string(s.k));
      const auto d = make_data<T>(value_mode::exact, 8, l, s);
      std::vector<double> out(s.m * s.n);
      oracle_forward<T>(l, s.m, s.n, s.k, d.x.data(), d.w.data(), out.data());
      const auto want = naive_forward(l, s, d);
      for (std::size_t i = 0; i < out.size(); ++i)
        ASSERT_EQ(bits(out[i]), bits(static_cast<double>(want[i]))) << "index " << i;
    }
}

// The reference's error against the exact product is at most γ_K·mag; the oracle adds its own
// final rounding to double and the 113-bit accumulation error, both counted here.
TYPED_TEST(oracle_test, reference_stays_within_gamma_k_of_the_oracle) {
  using T = TypeParam;
  constexpr dtype t = dtype_of<T>();
  double max_ratio = 0;
  for (value_mode mode : {value_mode::uniform, value_mode::wide, value_mode::cancel})
    for (weight_layout l : layouts)
      for (shape s : oracle_shapes()) {
        SCOPED_TRACE(std::string(to_string(mode)) + " " + std::string(to_string(l)) +
                     " M=" + std::to_string(s.m) + " N=" + std::to_string(s.n) +
                     " K=" + std::to_string(s.k));
        const auto d = make_data<T>(mode, 41, l, s);
        const std::size_t count = s.m * s.n;
        std::vector<T> y(count);
        std::vector<double> exact(count), mag(count);
        linear_forward<T>(l, s.m, s.n, s.k, d.x.data(), d.w.data(), y.data());
        magnitude_forward<T>(l, s.m, s.n, s.k, d.x.data(), d.w.data(), mag.data());
        oracle_forward<T>(l, s.m, s.n, s.k, d.x.data(), d.w.data(), exact.data());
        const auto k = static_cast<std::int64_t>(s.k);
        for (std::size_t i = 0; i < count; ++i) {
          const double inflated = mag[i] / (1 - gamma(k, dtype::f64));
          const double oracle_error = std::ldexp(std::fabs(exact[i]), -53) +
                                      static_cast<double>(k) * std::ldexp(inflated, -112);
          const double err = std::fabs(static_cast<double>(y[i]) - exact[i]);
          ASSERT_LE(err, gamma(k, t) * inflated + oracle_error) << "index " << i;
          if (mag[i] > 0) max_ratio = std::max(max_ratio, err / (unit_roundoff(t) * mag[i]));
        }
      }
  EXPECT_GT(max_ratio, 0.0) << "the reference always matched the oracle: check is vacuous";
}

TYPED_TEST(oracle_test, oracle_is_more_accurate_than_the_dtype) {
  using T = TypeParam;
  const shape s{1, 1, 4};
  const weight_layout l = weight_layout::in_out;
  const T big = std::ldexp(T(1), std::numeric_limits<T>::digits);
  const std::vector<T> x{big, T(1), T(1), -big};
  const std::vector<T> w{T(1), T(1), T(1), T(1)};
  double exact = 0;
  oracle_forward<T>(l, s.m, s.n, s.k, x.data(), w.data(), &exact);
  EXPECT_EQ(exact, 2.0);
  layer_data<T> d{x, w, {}};
  EXPECT_EQ(naive_forward(l, s, d)[0], T(0));
}

}  // namespace
}  // namespace shardcheck::ref::test
