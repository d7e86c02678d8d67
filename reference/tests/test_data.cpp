#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "naive.hpp"
#include "shardcheck/reference/data.hpp"

namespace shardcheck::ref::test {
namespace {

constexpr value_mode modes[] = {value_mode::exact,  value_mode::uniform,   value_mode::wide,
                                value_mode::cancel, value_mode::nonfinite, value_mode::zero_inf};
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

// zero_inf: exact zeros of both signs in about one element in four; NaN, +Inf and -Inf only where
// a hot row crosses a hot column (about 1/8 of each), half the elements there; the rest uniform.
TYPED_TEST(data_test, zero_inf_puts_zeros_beside_nonfinite_rows_and_columns) {
  using T = TypeParam;
  const std::size_t n = 256;
  std::size_t zeros = 0, negative_zeros = 0, nan = 0, pos_inf = 0, neg_inf = 0;
  std::set<std::uint64_t> rows, cols;
  for (std::uint64_t r = 0; r < n; ++r)
    for (std::uint64_t c = 0; c < n; ++c) {
      const T v = element<T>(value_mode::zero_inf, 3, x_id, r, c);
      if (std::isnan(v) || std::isinf(v)) {
        rows.insert(r);
        cols.insert(c);
        ++(std::isnan(v) ? nan : v > 0 ? pos_inf : neg_inf);
      } else if (v == T(0)) {
        ++zeros;
        negative_zeros += std::signbit(v) ? 1 : 0;
      } else {
        ASSERT_EQ(bits(v), bits(element<T>(value_mode::uniform, 3, x_id, r, c)));
      }
    }
  EXPECT_GT(zeros, n * n / 5);
  EXPECT_LT(zeros, n * n * 3 / 10);
  EXPECT_GT(negative_zeros, zeros * 2 / 5);
  EXPECT_LT(negative_zeros, zeros * 3 / 5);
  // Non-finite values in about an eighth of the rows and of the columns, and about half the
  // elements where they cross (n²/128 in all).
  EXPECT_GT(rows.size(), n / 12);
  EXPECT_LT(rows.size(), n / 5);
  EXPECT_GT(cols.size(), n / 12);
  EXPECT_LT(cols.size(), n / 5);
  const std::size_t nonfinite = nan + pos_inf + neg_inf;
  EXPECT_GT(nonfinite, n * n / 256);
  EXPECT_LT(nonfinite, n * n / 64);
  EXPECT_GT(nan, 0u);
  EXPECT_GT(pos_inf, 0u);
  EXPECT_GT(neg_inf, 0u);
  // Another tensor's hot rows are others.
  std::size_t same = 0;
  for (std::uint64_t r : rows) {
    bool hot = false;
    for (std::uint64_t c = 0; c < n && !hot; ++c)
      hot = !std::isfinite(element<T>(value_mode::zero_inf, 3, w_id, r, c));
    same += hot ? 1 : 0;
  }
  EXPECT_LT(same, rows.size() / 2);
}

// Partial inputs: the shares of a value sum to it exactly in every order and every tree, the
// bulk sits on every coordinate for some elements, and the offsets take both signs.
TYPED_TEST(data_test, partial_shares_sum_exactly_in_any_order_and_are_asymmetric) {
  using T = TypeParam;
  for (value_mode mode :
       {value_mode::exact, value_mode::uniform, value_mode::wide, value_mode::cancel,
        value_mode::nonfinite, value_mode::positive, value_mode::zero_inf})
    for (int parts = 1; parts <= 5; ++parts) {
      SCOPED_TRACE(std::string(to_string(mode)) + " parts " + std::to_string(parts));
      std::vector<std::size_t> bulk_on(static_cast<std::size_t>(parts), 0);
      std::size_t positive = 0, negative = 0, one_share_is_v = 0;
      const std::size_t count = 400;
      for (std::uint64_t i = 0; i < count; ++i) {
        const T v = element<T>(mode, 8, x_id, i / 20, i % 20);
        std::vector<T> s;
        for (int r = 0; r < parts; ++r)
          s.push_back(partial_share<T>(v, mode, 8, x_id, i / 20, i % 20, r, parts));
        std::vector<int> order(static_cast<std::size_t>(parts));
        for (int r = 0; r < parts; ++r) order[static_cast<std::size_t>(r)] = r;
        do {
          T left = s[static_cast<std::size_t>(order[0])];  // ((s0 + s1) + s2) + …
          for (int r = 1; r < parts; ++r) left += s[static_cast<std::size_t>(order[r])];
          std::vector<T> level;  // pairwise, a tree
          for (int r : order) level.push_back(s[static_cast<std::size_t>(r)]);
          while (level.size() > 1) {
            std::vector<T> next;
            for (std::size_t k = 0; k + 1 < level.size(); k += 2)
              next.push_back(level[k] + level[k + 1]);
            if (level.size() % 2 == 1) next.push_back(level.back());
            level.swap(next);
          }
          for (const T sum : {left, level[0]}) {
            if (std::isnan(v))
              ASSERT_TRUE(std::isnan(sum)) << i;
            else
              ASSERT_EQ(bits(sum), bits(v)) << i << " " << v;
          }
        } while (std::next_permutation(order.begin(), order.end()));
        std::size_t largest = 0;
        for (std::size_t r = 1; r < s.size(); ++r)
          if (std::fabs(s[r]) > std::fabs(s[largest])) largest = r;
        if (std::isfinite(v) && v != T(0)) ++bulk_on[largest];
        bool holds_v = false;
        for (const T share : s) {
          positive += share > T(0) ? 1 : 0;
          negative += share < T(0) ? 1 : 0;
          holds_v = holds_v || bits(share) == bits(v);
        }
        one_share_is_v += parts > 1 && holds_v && std::isfinite(v) && v != T(0) ? 1 : 0;
      }
      if (parts == 1) continue;
      for (std::size_t on : bulk_on) {
        EXPECT_GT(on, count / (4 * bulk_on.size())) << "asymmetric";
      }
      // Exact mode's grid is coarse (eighths within [-1, 1]): more offsets are 0 there.
      const std::size_t signed_at_least =
          count * static_cast<std::size_t>(parts) / (mode == value_mode::exact ? 8 : 4);
      EXPECT_GT(positive, signed_at_least);
      EXPECT_GT(negative, signed_at_least);
      if (mode != value_mode::exact) {
        EXPECT_LT(one_share_is_v, count / 10);
      }
    }
}

TEST(partial_share, minus_zero_and_bad_coordinates) {
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(bits(partial_share<double>(-0.0, value_mode::uniform, 1, x_id, 0, 0, r, 3)),
              bits(-0.0));
  EXPECT_THROW((void)partial_share<double>(1.0, value_mode::uniform, 1, x_id, 0, 0, 3, 3), error);
  EXPECT_THROW((void)partial_share<double>(1.0, value_mode::uniform, 1, x_id, 0, 0, 0, 0), error);
  EXPECT_EQ(partial_share<float>(0.75f, value_mode::uniform, 1, x_id, 0, 0, 0, 1), 0.75f);
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
