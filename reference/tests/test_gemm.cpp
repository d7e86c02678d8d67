#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "naive.hpp"
#include "shardcheck/reference/bound.hpp"
#include "shardcheck/reference/gemm.hpp"

namespace shardcheck::ref::test {
namespace {

enum class op { forward, dx, dw };
constexpr op ops[] = {op::forward, op::dx, op::dw};

std::string describe(op o, weight_layout l, shape s) {
  const char* names[] = {"forward", "dx", "dw"};
  return std::string(names[static_cast<int>(o)]) + " " + std::string(to_string(l)) +
         " M=" + std::to_string(s.m) + " N=" + std::to_string(s.n) + " K=" + std::to_string(s.k);
}

std::size_t out_size(op o, shape s) {
  return o == op::forward ? s.m * s.n : o == op::dx ? s.m * s.k : s.n * s.k;
}

std::int64_t contraction(op o, shape s) {
  return static_cast<std::int64_t>(o == op::forward ? s.k : o == op::dx ? s.n : s.m);
}

template <class T>
std::vector<T> run_ref(op o, weight_layout l, shape s, const layer_data<T>& d) {
  std::vector<T> out(out_size(o, s), std::numeric_limits<T>::quiet_NaN());
  if (o == op::forward)
    linear_forward<T>(l, s.m, s.n, s.k, d.x.data(), d.w.data(), out.data());
  else if (o == op::dx)
    linear_backward_dx<T>(l, s.m, s.n, s.k, d.dy.data(), d.w.data(), out.data());
  else
    linear_backward_dw<T>(l, s.m, s.n, s.k, d.dy.data(), d.x.data(), out.data());
  return out;
}

template <class T>
std::vector<T> run_naive(op o, weight_layout l, shape s, const layer_data<T>& d) {
  return o == op::forward ? naive_forward(l, s, d)
         : o == op::dx    ? naive_dx(l, s, d)
                          : naive_dw(l, s, d);
}

template <class T>
std::vector<double> run_mag(op o, weight_layout l, shape s, const layer_data<T>& d) {
  std::vector<double> out(out_size(o, s), std::numeric_limits<double>::quiet_NaN());
  if (o == op::forward)
    magnitude_forward<T>(l, s.m, s.n, s.k, d.x.data(), d.w.data(), out.data());
  else if (o == op::dx)
    magnitude_backward_dx<T>(l, s.m, s.n, s.k, d.dy.data(), d.w.data(), out.data());
  else
    magnitude_backward_dw<T>(l, s.m, s.n, s.k, d.dy.data(), d.x.data(), out.data());
  return out;
}

template <class T>
class gemm_test : public ::testing::Test {};
using element_types = ::testing::Types<float, double>;
TYPED_TEST_SUITE(gemm_test, element_types);

TYPED_TEST(gemm_test, exact_mode_is_bitwise_equal_to_naive_loop) {
  using T = TypeParam;
  for (weight_layout l : layouts)
    for (shape s : shapes())
      for (op o : ops) {
        SCOPED_TRACE(describe(o, l, s));
        const auto d = make_data<T>(value_mode::exact, 11, l, s);
        const auto diff = first_bit_difference(run_ref(o, l, s, d), run_naive(o, l, s, d));
        EXPECT_FALSE(diff.has_value()) << "first difference at flat index " << *diff;
      }
}

template <class T>
std::size_t count_beyond_bound(op o, shape s, const std::vector<T>& got, const std::vector<T>& want,
                               const std::vector<double>& mag, double* max_ratio) {
  const std::int64_t k = contraction(o, s);
  std::size_t beyond = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - static_cast<double>(want[i]));
    if (!(err <= element_bound(mag[i], k, k, dtype_of<T>(), k))) ++beyond;
    if (mag[i] > 0)
      *max_ratio = std::max(*max_ratio, err / (unit_roundoff(dtype_of<T>()) * mag[i]));
  }
  return beyond;
}

TYPED_TEST(gemm_test, rounding_modes_stay_within_derived_bound) {
  using T = TypeParam;
  double max_ratio = 0;
  for (value_mode mode : {value_mode::uniform, value_mode::wide, value_mode::cancel})
    for (weight_layout l : layouts)
      for (shape s : shapes())
        for (op o : ops) {
          SCOPED_TRACE(std::string(to_string(mode)) + " " + describe(o, l, s));
          const auto d = make_data<T>(mode, 23, l, s);
          const auto got = run_ref(o, l, s, d);
          EXPECT_EQ(
              count_beyond_bound(o, s, got, run_naive(o, l, s, d), run_mag(o, l, s, d), &max_ratio),
              0u);
        }
  EXPECT_GT(max_ratio, 0.0) << "the reference and the naive loop never differed: check is vacuous";
}

TYPED_TEST(gemm_test, dropping_one_term_breaks_the_bound) {
  using T = TypeParam;
  const shape s{13, 11, 17};
  for (weight_layout l : layouts) {
    SCOPED_TRACE(to_string(l));
    auto d = make_data<T>(value_mode::uniform, 23, l, s);
    const auto got = run_ref(op::forward, l, s, d);
    const auto mag = run_mag(op::forward, l, s, d);
    d.x[0] = 0;
    double max_ratio = 0;
    EXPECT_GT(count_beyond_bound(op::forward, s, got, naive_forward(l, s, d), mag, &max_ratio), 0u);
  }
}

TYPED_TEST(gemm_test, magnitude_is_the_product_of_absolute_values) {
  using T = TypeParam;
  for (weight_layout l : layouts)
    for (shape s : shapes())
      for (op o : ops) {
        SCOPED_TRACE(describe(o, l, s));
        const auto exact = make_data<T>(value_mode::exact, 5, l, s);
        EXPECT_FALSE(
            first_bit_difference(run_mag(o, l, s, exact), run_naive(o, l, s, absolute(exact)))
                .has_value());
        const auto d = make_data<T>(value_mode::uniform, 5, l, s);
        const auto mag = run_mag(o, l, s, d);
        const auto want = run_naive(o, l, s, absolute(d));
        const double g = gamma(contraction(o, s), dtype::f64);
        for (std::size_t i = 0; i < mag.size(); ++i) {
          ASSERT_GE(mag[i], 0.0);
          ASSERT_LE(std::fabs(mag[i] - want[i]), 2 * g * want[i] / (1 - g)) << "index " << i;
        }
      }
}

enum class kind { finite, nan, pos_inf, neg_inf };

template <class T>
kind classify(T v) {
  if (std::isnan(v)) return kind::nan;
  if (std::isinf(v)) return v > 0 ? kind::pos_inf : kind::neg_inf;
  return kind::finite;
}

TYPED_TEST(gemm_test, nonfinite_positions_match_naive_loop) {
  using T = TypeParam;
  std::size_t nonfinite_seen = 0;
  for (weight_layout l : layouts)
    for (shape s : shapes())
      for (op o : ops) {
        SCOPED_TRACE(describe(o, l, s));
        const auto d = make_data<T>(value_mode::nonfinite, 3, l, s);
        const auto got = run_ref(o, l, s, d);
        const auto want = run_naive(o, l, s, d);
        ASSERT_EQ(got.size(), want.size());
        for (std::size_t i = 0; i < got.size(); ++i) {
          ASSERT_EQ(classify(got[i]), classify(want[i])) << "index " << i;
          if (classify(want[i]) != kind::finite) ++nonfinite_seen;
        }
      }
  EXPECT_GT(nonfinite_seen, 0u);
}

// zero_inf data: the reference GEMM forms every product, 0·Inf and 0·NaN included, so an output
// whose only non-finite terms meet zeros is NaN, as in the naive loop; a forward that skips
// zero activations (X) leaves some of them finite or infinite.
TYPED_TEST(gemm_test, zero_inf_products_reach_the_result) {
  using T = TypeParam;
  std::size_t skipping_differs = 0;
  for (weight_layout l : layouts)
    for (shape s : shapes())
      for (op o : ops) {
        SCOPED_TRACE(describe(o, l, s));
        const auto d = make_data<T>(value_mode::zero_inf, 5, l, s);
        const auto got = run_ref(o, l, s, d);
        const auto want = run_naive(o, l, s, d);
        ASSERT_EQ(got.size(), want.size());
        for (std::size_t i = 0; i < got.size(); ++i)
          ASSERT_EQ(classify(got[i]), classify(want[i])) << "index " << i;
        if (o != op::forward) continue;
        for (std::size_t i = 0; i < s.m; ++i)
          for (std::size_t j = 0; j < s.n; ++j) {
            T acc = 0;
            for (std::size_t k = 0; k < s.k; ++k)
              if (d.x[i * s.k + k] != T(0)) acc += d.x[i * s.k + k] * w_at(l, d.w, s, j, k);
            if (classify(acc) != classify(got[i * s.n + j])) ++skipping_differs;
          }
      }
  EXPECT_GT(skipping_differs, 0u);
}

TYPED_TEST(gemm_test, transpose_combinations_honour_leading_dimensions_alpha_and_beta) {
  using T = TypeParam;
  const std::size_t m = 7, n = 5, k = 11, pad = 3;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      SCOPED_TRACE(std::string("trans_a=") + (ta ? "1" : "0") + " trans_b=" + (tb ? "1" : "0"));
      const std::size_t a_rows = ta ? k : m, a_cols = ta ? m : k;
      const std::size_t b_rows = tb ? n : k, b_cols = tb ? k : n;
      const std::size_t lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
      const auto a = block<T>(value_mode::exact, 1, tensor_id::x, a_rows, lda);
      const auto b = block<T>(value_mode::exact, 1, tensor_id::w, b_rows, ldb);
      auto c = block<T>(value_mode::exact, 1, tensor_id::dy, m, ldc);
      auto want = c;
      for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < n; ++j) {
          T acc = 0;
          for (std::size_t p = 0; p < k; ++p)
            acc += (ta ? a[p * lda + i] : a[i * lda + p]) * (tb ? b[j * ldb + p] : b[p * ldb + j]);
          want[i * ldc + j] = T(2) * acc + T(0.5) * c[i * ldc + j];
        }
      gemm<T>(ta, tb, m, n, k, T(2), a.data(), lda, b.data(), ldb, T(0.5), c.data(), ldc);
      EXPECT_FALSE(first_bit_difference(c, want).has_value());
    }
}

TYPED_TEST(gemm_test, zero_inner_dimension_scales_c) {
  using T = TypeParam;
  const T nan = std::numeric_limits<T>::quiet_NaN();
  std::vector<T> c(6, nan);
  gemm<T>(false, false, 2, 3, 0, T(1), nullptr, 0, nullptr, 0, T(0), c.data(), 3);
  for (T v : c) EXPECT_EQ(bits(v), bits(T(0)));
  c = {1, 2, 3, 4, 5, 6};
  gemm<T>(true, true, 2, 3, 0, T(1), nullptr, 0, nullptr, 0, T(2), c.data(), 3);
  EXPECT_EQ(c, (std::vector<T>{2, 4, 6, 8, 10, 12}));
  gemm<T>(false, false, 2, 3, 0, T(1), nullptr, 0, nullptr, 0, T(1), c.data(), 3);
  EXPECT_EQ(c, (std::vector<T>{2, 4, 6, 8, 10, 12}));
}

TYPED_TEST(gemm_test, zero_beta_overwrites_nan_in_c) {
  using T = TypeParam;
  const std::vector<T> a(4, T(1)), b(4, T(1));
  for (std::size_t m : {1, 2})
    for (std::size_t k : {1, 2}) {
      std::vector<T> c(m * 2, std::numeric_limits<T>::quiet_NaN());
      gemm<T>(false, false, m, 2, k, T(1), a.data(), k, b.data(), 2, T(0), c.data(), 2);
      for (T v : c) EXPECT_EQ(v, T(k));
    }
}

TYPED_TEST(gemm_test, empty_output_is_left_alone) {
  using T = TypeParam;
  gemm<T>(false, false, 0, 3, 4, T(1), nullptr, 0, nullptr, 0, T(0), nullptr, 0);
  std::vector<T> c(2, T(7));
  gemm<T>(false, false, 2, 0, 4, T(1), nullptr, 0, nullptr, 0, T(0), c.data(), 1);
  EXPECT_EQ(c, (std::vector<T>{7, 7}));
}

TYPED_TEST(gemm_test, accumulate_adds_into_dw) {
  using T = TypeParam;
  const shape s{6, 4, 5};
  for (weight_layout l : layouts) {
    SCOPED_TRACE(to_string(l));
    const auto d = make_data<T>(value_mode::exact, 9, l, s);
    std::vector<T> dw(s.n * s.k, T(1));
    linear_backward_dw<T>(l, s.m, s.n, s.k, d.dy.data(), d.x.data(), dw.data(), true);
    auto want = naive_dw(l, s, d);
    for (T& v : want) v += T(1);
    EXPECT_FALSE(first_bit_difference(dw, want).has_value());
    std::vector<T> unchanged(s.n * s.k, T(3));
    linear_backward_dw<T>(l, 0, s.n, s.k, nullptr, nullptr, unchanged.data(), true);
    EXPECT_EQ(unchanged, std::vector<T>(s.n * s.k, T(3)));
  }
}

TYPED_TEST(gemm_test, leading_dimension_too_small_throws) {
  using T = TypeParam;
  std::vector<T> a(12), b(12), c(12);
  EXPECT_THROW(gemm<T>(false, false, 3, 3, 4, T(1), a.data(), 3, b.data(), 3, T(0), c.data(), 3),
               error);
  EXPECT_THROW(gemm<T>(true, false, 3, 3, 4, T(1), a.data(), 2, b.data(), 3, T(0), c.data(), 3),
               error);
  EXPECT_THROW(gemm<T>(false, true, 3, 3, 4, T(1), a.data(), 4, b.data(), 3, T(0), c.data(), 3),
               error);
  EXPECT_THROW(gemm<T>(false, false, 3, 3, 4, T(1), a.data(), 4, b.data(), 3, T(0), c.data(), 2),
               error);
  EXPECT_NO_THROW(
      gemm<T>(false, false, 3, 3, 4, T(1), a.data(), 4, b.data(), 3, T(0), c.data(), 3));
}

}  // namespace
}  // namespace shardcheck::ref::test
