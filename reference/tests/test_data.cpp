#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <vector>

#include "naive.hpp"
#include "shardcheck/reference/data.hpp"

namespace shardcheck::ref::test {
namespace {

constexpr value_mode modes[] = {value_mode::exact, value_mode::uniform, value_mode::wide,
                                value_mode::cancel, value_mode::nonfinite};
constexpr auto x_id = static_cast<std::uint32_t>(tensor_id::x);
constexpr auto w_id = static_cast<std::uint32_t>(tensor_id::w);

TEST(counter_hash, is_stable_across_builds) {
  EXPECT_EQ(counter_hash(0, 0, 0, 0), counter_hash(0, 0, 0, 0));
  EXPECT_EQ(counter_hash(0, 0, 0, 0), 0x2130748aaac80268ULL);
  EXPECT_EQ(counter_hash(42, 1, 7, 3), 0x2c434c2add5c1f60ULL);
  EXPECT_EQ(element<double>(value_mode::uniform, 42, 1, 7, 3), -0x1.4ef2cf548a8fap-1);
  EXPECT_EQ(element<float>(value_mode::uniform, 42, 1, 7, 3), -0x1.4ef2dp-1f);
}

TEST(counter_hash, every_counter_matters) {
  const std::uint64_t base = counter_hash(1, 1, 1, 1);
  EXPECT_NE(counter_hash(2, 1, 1, 1), base);
  EXPECT_NE(counter_hash(1, 2, 1, 1), base);
  EXPECT_NE(counter_hash(1, 1, 2, 1), base);
  EXPECT_NE(counter_hash(1, 1, 1, 2), base);
  EXPECT_NE(counter_hash(0, 1, 2, 3), counter_hash(0, 1, 3, 2));
}

template <class T>
class data_test : public ::testing::Test {};
using element_types = ::testing::Types<float, double>;
TYPED_TEST_SUITE(data_test, element_types);

TYPED_TEST(data_test, same_counters_give_same_bits) {
  using T = TypeParam;
  for (value_mode mode : modes)
    for (std::uint64_t r = 0; r < 40; ++r)
      for (std::uint64_t c = 0; c < 40; ++c)
        ASSERT_EQ(bits(element<T>(mode, 99, x_id, r, c)), bits(element<T>(mode, 99, x_id, r, c)));
}

TYPED_TEST(data_test, sub_block_equals_part_of_full_block) {
  using T = TypeParam;
  const std::size_t rows = 13, cols = 11, r0 = 3, sub_rows = 6, c0 = 2, sub_cols = 5, ld = 7;
  for (value_mode mode : modes) {
    SCOPED_TRACE(to_string(mode));
    const auto full = block<T>(mode, 5, tensor_id::x, rows, cols);
    std::vector<T> sub(sub_rows * ld, T(42));
    fill_block<T>(mode, 5, x_id, r0, sub_rows, c0, sub_cols, sub.data(), ld);
    for (std::size_t i = 0; i < sub_rows; ++i) {
      for (std::size_t j = 0; j < sub_cols; ++j) {
        ASSERT_EQ(bits(sub[i * ld + j]), bits(full[(r0 + i) * cols + c0 + j]));
        ASSERT_EQ(bits(sub[i * ld + j]), bits(element<T>(mode, 5, x_id, r0 + i, c0 + j)));
      }
      for (std::size_t j = sub_cols; j < ld; ++j) ASSERT_EQ(sub[i * ld + j], T(42));
    }
  }
}

TYPED_TEST(data_test, different_tensors_and_seeds_differ) {
  using T = TypeParam;
  const std::size_t n = 32;
  const auto a = block<T>(value_mode::uniform, 1, tensor_id::x, n, n);
  const auto by_tensor = block<T>(value_mode::uniform, 1, tensor_id::w, n, n);
  const auto by_seed = block<T>(value_mode::uniform, 2, tensor_id::x, n, n);
  std::size_t same_tensor = 0, same_seed = 0, same_transposed = 0;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      same_tensor += a[i * n + j] == by_tensor[i * n + j];
      same_seed += a[i * n + j] == by_seed[i * n + j];
      same_transposed += i != j && a[i * n + j] == a[j * n + i];
    }
  EXPECT_LE(same_tensor, 1u);
  EXPECT_LE(same_seed, 1u);
  EXPECT_LE(same_transposed, 1u);
}

TYPED_TEST(data_test, exact_is_eighths_in_minus_one_to_one) {
  using T = TypeParam;
  std::set<int> seen;
  for (std::uint64_t r = 0; r < 64; ++r)
    for (std::uint64_t c = 0; c < 64; ++c) {
      const T v = element<T>(value_mode::exact, 3, x_id, r, c);
      const T scaled = v * T(8);
      ASSERT_EQ(scaled, std::round(scaled));
      ASSERT_GE(v, T(-1));
      ASSERT_LE(v, T(1));
      seen.insert(static_cast<int>(scaled));
    }
  EXPECT_EQ(seen.size(), 17u);
}

TYPED_TEST(data_test, uniform_fills_minus_one_to_one_with_full_mantissa) {
  using T = TypeParam;
  double sum = 0;
  bool below_zero = false, above_half = false, lowest_bit_used = false;
  const std::size_t count = 4096;
  for (std::uint64_t i = 0; i < count; ++i) {
    const T v = element<T>(value_mode::uniform, 3, x_id, i / 64, i % 64);
    ASSERT_GE(v, T(-1));
    ASSERT_LE(v, T(1));
    sum += v;
    below_zero |= v < T(-0.5);
    above_half |= v > T(0.5);
    const T grid = std::ldexp(T(1), 1 - std::numeric_limits<T>::digits);
    const T q = v / grid;
    lowest_bit_used |= std::fmod(q, T(2)) != T(0);
  }
  EXPECT_LT(std::fabs(sum / count), 0.05);
  EXPECT_TRUE(below_zero);
  EXPECT_TRUE(above_half);
  EXPECT_TRUE(lowest_bit_used);
}

TYPED_TEST(data_test, wide_spans_exponents_minus_sixteen_to_sixteen) {
  using T = TypeParam;
  std::set<int> exponents;
  bool negative = false, positive = false;
  for (std::uint64_t i = 0; i < 8192; ++i) {
    const T v = element<T>(value_mode::wide, 3, x_id, i / 64, i % 64);
    ASSERT_TRUE(std::isfinite(v));
    int e = 0;
    const T frac = std::frexp(std::fabs(v), &e);
    ASSERT_GE(frac, T(0.5));
    exponents.insert(e - 1);
    negative |= v < 0;
    positive |= v > 0;
  }
  EXPECT_EQ(*exponents.begin(), -16);
  EXPECT_EQ(*exponents.rbegin(), 16);
  EXPECT_EQ(exponents.size(), 33u);
  EXPECT_TRUE(negative);
  EXPECT_TRUE(positive);
}

TYPED_TEST(data_test, cancel_mixes_large_and_small_terms) {
  using T = TypeParam;
  std::size_t large = 0, small = 0, negative = 0;
  const std::size_t count = 8192;
  for (std::uint64_t i = 0; i < count; ++i) {
    const T v = element<T>(value_mode::cancel, 3, x_id, i / 64, i % 64);
    const T a = std::fabs(v);
    if (a >= T(4096)) {
      ASSERT_LT(a, T(8192));
      ++large;
    } else {
      ASSERT_LT(a, T(1));
      ++small;
    }
    negative += v < 0;
  }
  EXPECT_GT(large, count * 2 / 5);
  EXPECT_GT(small, count * 2 / 5);
  EXPECT_GT(negative, count * 2 / 5);
  EXPECT_LT(negative, count * 3 / 5);
}

TYPED_TEST(data_test, nonfinite_is_uniform_with_about_one_in_thirty_two_replaced) {
  using T = TypeParam;
  std::size_t nan = 0, pos_inf = 0, neg_inf = 0;
  const std::size_t count = 16384;
  for (std::uint64_t i = 0; i < count; ++i) {
    const T v = element<T>(value_mode::nonfinite, 3, x_id, i / 128, i % 128);
    if (std::isnan(v))
      ++nan;
    else if (std::isinf(v))
      ++(v > 0 ? pos_inf : neg_inf);
    else
      ASSERT_EQ(bits(v), bits(element<T>(value_mode::uniform, 3, x_id, i / 128, i % 128)));
  }
  const std::size_t replaced = nan + pos_inf + neg_inf;
  EXPECT_GT(replaced, count / 48);
  EXPECT_LT(replaced, count / 24);
  EXPECT_GT(nan, 0u);
  EXPECT_GT(pos_inf, 0u);
  EXPECT_GT(neg_inf, 0u);
}

TEST(fill_block, leading_dimension_smaller_than_columns_throws) {
  std::vector<double> out(12);
  EXPECT_THROW(fill_block<double>(value_mode::uniform, 1, x_id, 0, 3, 0, 4, out.data(), 3), error);
  EXPECT_NO_THROW(fill_block<double>(value_mode::uniform, 1, w_id, 0, 3, 0, 4, out.data(), 4));
}

TYPED_TEST(data_test, positive_is_uniform_on_zero_one) {
  using T = TypeParam;
  const std::size_t count = 16384;
  double sum = 0;
  for (std::uint64_t i = 0; i < count; ++i) {
    const T v = element<T>(value_mode::positive, 3, x_id, i / 128, i % 128);
    ASSERT_GE(v, T(0));
    ASSERT_LT(v, T(1));
    sum += static_cast<double>(v);
  }
  // The mean of 16384 uniform [0, 1) values: σ = 1/√(12·16384) ≈ 0.0023; 0.02 is about 9σ.
  EXPECT_NEAR(sum / count, 0.5, 0.02);
}

}  // namespace
}  // namespace shardcheck::ref::test
