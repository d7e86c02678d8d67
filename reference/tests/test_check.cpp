#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "naive.hpp"
#include "shardcheck/reference/bound.hpp"
#include "shardcheck/reference/check.hpp"
#include "shardcheck/reference/gemm.hpp"

namespace shardcheck::ref::test {
namespace {

template <class T>
class check_test : public ::testing::Test {
 protected:
  static constexpr shape s{6, 9, 25};
  static constexpr weight_layout l = weight_layout::out_in;
  const layer_data<T> d = make_data<T>(value_mode::uniform, 17, l, s);
  std::vector<T> expected = run_forward();
  std::vector<double> mag = run_magnitude();
  compare_options opt{false, 25, 25, 25};

  std::vector<T> run_forward() const {
    std::vector<T> y(s.m * s.n);
    linear_forward<T>(l, s.m, s.n, s.k, d.x.data(), d.w.data(), y.data());
    return y;
  }
  std::vector<double> run_magnitude() const {
    std::vector<double> m(s.m * s.n);
    magnitude_forward<T>(l, s.m, s.n, s.k, d.x.data(), d.w.data(), m.data());
    return m;
  }
  [[nodiscard]] double bound_at(std::size_t i, std::size_t j) const {
    return element_bound(mag[i * s.n + j], 25, 25, dtype_of<T>(), 25);
  }
  [[nodiscard]] std::optional<mismatch> compare(const std::vector<T>& got) const {
    return compare_block<T>(s.m, s.n, got.data(), s.n, expected.data(), s.n, mag.data(), s.n, opt);
  }
};
using element_types = ::testing::Types<float, double>;
TYPED_TEST_SUITE(check_test, element_types);

TYPED_TEST(check_test, identical_blocks_pass) {
  EXPECT_FALSE(this->compare(this->expected).has_value());
  this->opt.bitwise = true;
  EXPECT_FALSE(this->compare(this->expected).has_value());
}

TYPED_TEST(check_test, error_within_the_bound_passes) {
  auto got = this->expected;
  got[2 * 9 + 3] += static_cast<TypeParam>(0.5 * this->bound_at(2, 3));
  EXPECT_FALSE(this->compare(got).has_value());
}

TYPED_TEST(check_test, perturbation_beyond_the_bound_is_reported) {
  using T = TypeParam;
  auto got = this->expected;
  const double b = this->bound_at(2, 3);
  got[2 * 9 + 3] += static_cast<T>(3 * b);
  const auto mm = this->compare(got);
  ASSERT_TRUE(mm.has_value());
  EXPECT_EQ(mm->row, 2u);
  EXPECT_EQ(mm->col, 3u);
  EXPECT_EQ(mm->reason, "value");
  EXPECT_EQ(mm->got, static_cast<double>(got[2 * 9 + 3]));
  EXPECT_EQ(mm->expected, static_cast<double>(this->expected[2 * 9 + 3]));
  EXPECT_DOUBLE_EQ(mm->bound, b);
  const double err = std::fabs(mm->got - mm->expected);
  EXPECT_GT(err, b);
  EXPECT_DOUBLE_EQ(mm->ratio, err / (unit_roundoff(dtype_of<T>()) * this->mag[2 * 9 + 3]));
  EXPECT_GT(mm->ratio, 2 * 2 * 25.0);
}

TYPED_TEST(check_test, first_failure_in_row_major_order_is_reported) {
  auto got = this->expected;
  got[3 * 9 + 1] += 1;
  got[1 * 9 + 4] -= 1;
  const auto mm = this->compare(got);
  ASSERT_TRUE(mm.has_value());
  EXPECT_EQ(mm->row, 1u);
  EXPECT_EQ(mm->col, 4u);
}

TYPED_TEST(check_test, leading_dimensions_select_the_block) {
  using T = TypeParam;
  auto got = this->expected;
  got[0 * 9 + 8] += 1;
  const std::size_t r0 = 1, c0 = 2, rows = 4, cols = 5;
  const auto sub = [&](const auto& v) { return v.data() + r0 * 9 + c0; };
  EXPECT_FALSE(compare_block<T>(rows, cols, sub(got), 9, sub(this->expected), 9, sub(this->mag), 9,
                                this->opt)
                   .has_value());
  got[(r0 + 2) * 9 + c0 + 3] += 1;
  const auto mm = compare_block<T>(rows, cols, sub(got), 9, sub(this->expected), 9, sub(this->mag),
                                   9, this->opt);
  ASSERT_TRUE(mm.has_value());
  EXPECT_EQ(mm->row, 2u);
  EXPECT_EQ(mm->col, 3u);
}

TYPED_TEST(check_test, nan_where_finite_expected_is_reported) {
  using T = TypeParam;
  for (bool bitwise : {false, true}) {
    this->opt.bitwise = bitwise;
    for (T bad : {std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity(),
                  -std::numeric_limits<T>::infinity()}) {
      auto got = this->expected;
      got[4 * 9 + 7] = bad;
      const auto mm = this->compare(got);
      ASSERT_TRUE(mm.has_value());
      EXPECT_EQ(mm->row, 4u);
      EXPECT_EQ(mm->col, 7u);
      EXPECT_EQ(mm->reason, "nonfinite");
    }
  }
}

TYPED_TEST(check_test, nonfinite_expected_must_be_matched_exactly) {
  using T = TypeParam;
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const T inf = std::numeric_limits<T>::infinity();
  const std::vector<T> expected{nan, inf, -inf, 1};
  const std::vector<double> mag{nan, inf, inf, 1};
  const auto cmp = [&](const std::vector<T>& got) {
    return compare_block<T>(1, 4, got.data(), 4, expected.data(), 4, mag.data(), 4, this->opt);
  };
  EXPECT_FALSE(cmp({-nan, inf, -inf, 1}).has_value());
  for (const auto& [got, col] : {std::pair{std::vector<T>{0, inf, -inf, 1}, 0u},
                                 std::pair{std::vector<T>{nan, -inf, -inf, 1}, 1u},
                                 std::pair{std::vector<T>{nan, inf, nan, 1}, 2u},
                                 std::pair{std::vector<T>{nan, inf, T(-1e30), 1}, 2u}}) {
    const auto mm = cmp(got);
    ASSERT_TRUE(mm.has_value());
    EXPECT_EQ(mm->col, col);
    EXPECT_EQ(mm->reason, "nonfinite");
  }
}

TYPED_TEST(check_test, one_ulp_is_reported_in_bitwise_mode_only) {
  using T = TypeParam;
  auto got = this->expected;
  T& v = got[5 * 9 + 2];
  v = std::nextafter(v, std::numeric_limits<T>::infinity());
  EXPECT_FALSE(this->compare(got).has_value());
  this->opt.bitwise = true;
  const auto mm = this->compare(got);
  ASSERT_TRUE(mm.has_value());
  EXPECT_EQ(mm->row, 5u);
  EXPECT_EQ(mm->col, 2u);
  EXPECT_EQ(mm->reason, "bitwise");
  EXPECT_EQ(mm->bound, 0.0);
  EXPECT_GT(mm->ratio, 0.0);
}

TYPED_TEST(check_test, signed_zero_differs_bitwise) {
  using T = TypeParam;
  const T got = T(-0.0), expected = T(0.0);
  const double mag = 0;
  compare_options opt{true, 1, 1, 1};
  const auto mm = compare_block<T>(1, 1, &got, 1, &expected, 1, &mag, 1, opt);
  ASSERT_TRUE(mm.has_value());
  EXPECT_EQ(mm->reason, "bitwise");
  EXPECT_EQ(mm->ratio, 0.0);
  opt.bitwise = false;
  EXPECT_FALSE(compare_block<T>(1, 1, &got, 1, &expected, 1, &mag, 1, opt).has_value());
}

TYPED_TEST(check_test, zero_magnitude_gives_infinite_ratio) {
  using T = TypeParam;
  const T got = std::numeric_limits<T>::denorm_min(), expected = 0;
  const double mag = 0;
  const auto mm = compare_block<T>(1, 1, &got, 1, &expected, 1, &mag, 1, this->opt);
  ASSERT_TRUE(mm.has_value());
  EXPECT_EQ(mm->reason, "value");
  EXPECT_EQ(mm->bound, 0.0);
  EXPECT_TRUE(std::isinf(mm->ratio));
}

TYPED_TEST(check_test, empty_block_passes) {
  using T = TypeParam;
  EXPECT_FALSE(compare_block<T>(0, 5, nullptr, 5, nullptr, 5, nullptr, 5, this->opt).has_value());
  EXPECT_FALSE(compare_block<T>(5, 0, nullptr, 0, nullptr, 0, nullptr, 0, this->opt).has_value());
}

// The statistical tier at k_par = k_ref = 4096 on 2 elements of mag 1 (λ from 2·2·4096 events):
// γ̃_4096(λ) ≈ 64λ·u against γ_4096 ≈ 4096·u, so an error of 3000·u fails as "statistical" with the
// statistical bound, 100·u passes, and a rigorous failure later in the block is reported first.
// At k = 25 the statistical bound, 5λ·u, is the looser one: it never fires before the rigorous.
TYPED_TEST(check_test, statistical_tier_fires_between_the_two_bounds) {
  using T = TypeParam;
  const dtype t = dtype_of<T>();
  const double u = unit_roundoff(t);
  const double lambda = lambda_for(2.0 * 2 * 4096, statistical_p_fail, u);
  compare_options opt{false, 4096, 4096, 4096};
  opt.lambda = lambda;
  const double mag[2] = {1.0, 1.0};
  const double stat = element_bound(1.0, 4096, 4096, t, 4096, lambda);
  const double rigorous = element_bound(1.0, 4096, 4096, t, 4096);
  EXPECT_NEAR(stat, 2 * 64 * lambda * u, 1e-3 * stat);
  ASSERT_LT(3000 * u, rigorous);
  ASSERT_GT(3000 * u, stat);
  const T expected[2] = {T(0.5), T(0.25)};
  T got[2] = {static_cast<T>(0.5 + 3000 * u), T(0.25)};
  const auto mm = compare_block<T>(1, 2, got, 2, expected, 2, mag, 2, opt);
  ASSERT_TRUE(mm.has_value());
  EXPECT_EQ(mm->reason, "statistical");
  EXPECT_EQ(mm->col, 0u);
  EXPECT_DOUBLE_EQ(mm->bound, stat);
  EXPECT_NEAR(mm->ratio, 3000 * u / stat, 1e-6 * mm->ratio);
  // Off (λ = 0): the same block passes the rigorous bound alone.
  opt.lambda = 0;
  EXPECT_FALSE(compare_block<T>(1, 2, got, 2, expected, 2, mag, 2, opt).has_value());
  // A rigorous failure at a later element wins.
  opt.lambda = lambda;
  got[1] = static_cast<T>(0.25 + 2 * rigorous);
  const auto hard = compare_block<T>(1, 2, got, 2, expected, 2, mag, 2, opt);
  ASSERT_TRUE(hard.has_value());
  EXPECT_EQ(hard->reason, "value");
  EXPECT_EQ(hard->col, 1u);
  // Within the statistical bound: passes.
  const T close[2] = {static_cast<T>(0.5 + 100 * u), T(0.25)};
  EXPECT_FALSE(compare_block<T>(1, 2, close, 2, expected, 2, mag, 2, opt).has_value());
  // At k = 25 the statistical bound is above the rigorous one.
  EXPECT_GT(element_bound(1.0, 25, 25, t, 25, lambda), element_bound(1.0, 25, 25, t, 25));
}

// A stack's statistical bound comes per element (stat_bound), like its rigorous one.
TYPED_TEST(check_test, statistical_tier_of_a_stack_reads_its_bound_array) {
  using T = TypeParam;
  const T got[2] = {T(1.5), T(2.0)}, expected[2] = {T(1.0), T(2.0)};
  const double rigorous[2] = {1.0, 1.0}, stat[2] = {0.25, 0.25};
  compare_options opt;
  opt.mag_is_bound = true;
  opt.stat_bound = stat;
  const auto mm = compare_block<T>(1, 2, got, 2, expected, 2, rigorous, 2, opt);
  ASSERT_TRUE(mm.has_value());
  EXPECT_EQ(mm->reason, "statistical");
  EXPECT_DOUBLE_EQ(mm->ratio, 2.0);
  opt.stat_bound = nullptr;
  EXPECT_FALSE(compare_block<T>(1, 2, got, 2, expected, 2, rigorous, 2, opt).has_value());
}

}  // namespace
}  // namespace shardcheck::ref::test
