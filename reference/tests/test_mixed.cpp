// The 16-bit storage dtypes: rounding to them, their policies' bounds and the window check.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "shardcheck/reference/bound.hpp"
#include "shardcheck/reference/data.hpp"
#include "shardcheck/reference/gemm.hpp"
#include "shardcheck/reference/mixed.hpp"

namespace shardcheck::ref::test {
namespace {

float f(bfloat16_t v) { return static_cast<float>(v); }
float f(half_t v) { return static_cast<float>(v); }

TEST(mixed, neighbours_in_bf16) {
  EXPECT_EQ(f(next_down(bfloat16_t(1.0f))), 0.99609375f);
  EXPECT_EQ(f(next_up(bfloat16_t(1.0f))), 1.0078125f);
  EXPECT_EQ(f(next_up(bfloat16_t(-1.0f))), -0.99609375f);
  EXPECT_LT(f(next_down(bfloat16_t(0.0f))), 0.0f);
  EXPECT_GT(f(next_up(bfloat16_t(-0.0f))), 0.0f);
  EXPECT_EQ(f(next_down(bfloat16_t(-INFINITY))), -INFINITY);
  EXPECT_TRUE(std::isinf(f(next_up(std::numeric_limits<bfloat16_t>::max()))));
  EXPECT_TRUE(std::isnan(f(next_up(std::numeric_limits<bfloat16_t>::quiet_NaN()))));
}

TEST(mixed, round_nearest_from_double) {
  EXPECT_EQ(f(round_nearest<bfloat16_t>(1.003)), 1.0f);
  EXPECT_EQ(f(round_nearest<bfloat16_t>(1.005)), 1.0078125f);
  EXPECT_EQ(f(round_nearest<bfloat16_t>(1.00390625)), 1.0f);       // a tie: to even
  EXPECT_EQ(f(round_nearest<bfloat16_t>(1.01171875)), 1.015625f);  // a tie: to even, upwards
  EXPECT_EQ(f(round_nearest<bfloat16_t>(-1.005)), -1.0078125f);
  // Through float it would round twice: 1 + 2⁻⁸ + 2⁻³⁰ is 1 + 2⁻⁸ in float, a tie, then 1.
  EXPECT_EQ(f(round_nearest<bfloat16_t>(1.0 + 0x1p-8 + 0x1p-30)), 1.0078125f);
  // f16's overflow threshold is 65520 (midway to 2¹⁶): below it 65504, from it on +inf.
  EXPECT_EQ(f(round_nearest<half_t>(65519.0)), 65504.0f);
  EXPECT_EQ(f(round_nearest<half_t>(65520.0)), INFINITY);
  EXPECT_EQ(f(round_nearest<half_t>(-65520.0)), -INFINITY);
  EXPECT_EQ(f(round_nearest<half_t>(3.0)), 3.0f);
}

TEST(mixed, directed_rounding) {
  EXPECT_EQ(f(round_down<bfloat16_t>(1.003)), 1.0f);
  EXPECT_EQ(f(round_up<bfloat16_t>(1.003)), 1.0078125f);
  EXPECT_EQ(f(round_down<bfloat16_t>(-1.003)), -1.0078125f);
  EXPECT_EQ(f(round_up<bfloat16_t>(-1.003)), -1.0f);
  EXPECT_EQ(f(round_down<bfloat16_t>(1.0)), 1.0f);  // representable: itself
  EXPECT_EQ(f(round_up<bfloat16_t>(1.0)), 1.0f);
  // f16: ulp 2⁻¹⁰ at 1; a value just above a double's rounding to float stays ordered.
  EXPECT_EQ(f(round_up<half_t>(1.0 + 1e-12)), 1.0f + 0x1p-10f);
  EXPECT_EQ(f(round_down<half_t>(1.0 + 1e-12)), 1.0f);
  EXPECT_EQ(f(round_up<half_t>(70000.0)), INFINITY);  // past f16's 65504
  EXPECT_EQ(f(round_down<half_t>(70000.0)), 65504.0f);
}

TEST(mixed, widen_is_exact_and_narrow_rounds_to_nearest_even) {
  const std::vector<float> in{1.0f + 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-9f, -3.0f};
  std::vector<bfloat16_t> out(in.size());
  narrow<bfloat16_t>(in.data(), in.size(), out.data());
  EXPECT_EQ(f(out[0]), 1.0f);  // a tie: to even
  EXPECT_EQ(f(out[1]), 1.0078125f);
  std::vector<float> back(in.size());
  widen<bfloat16_t>(out.data(), out.size(), back.data());
  EXPECT_EQ(back[2], -3.0f);
}

TEST(mixed, unit_roundoffs_and_exact_limits) {
  EXPECT_EQ(unit_roundoff(dtype::bf16), 0x1p-8);
  EXPECT_EQ(unit_roundoff(dtype::f16), 0x1p-11);
  EXPECT_EQ(size_of(dtype::bf16), 2u);
  EXPECT_EQ(exact_limit(dtype::bf16), 256);
  EXPECT_EQ(exact_limit(dtype::f16), 512);
  EXPECT_EQ(exact_limit(dtype::f32), 1 << 18);
}

TEST(mixed, exact_mode_sums_stay_exact_in_the_storage_dtype) {
  // bf16: values in {-1, 0, 1}; a running sum of 256 products in bf16 equals the exact sum.
  std::vector<bfloat16_t> x(256), w(256);
  fill_block<bfloat16_t>(value_mode::exact, 9, 1, 0, 1, 0, 256, x.data());
  fill_block<bfloat16_t>(value_mode::exact, 9, 2, 0, 1, 0, 256, w.data());
  bfloat16_t sum(0.0f);
  double exact = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float v = f(x[i]);
    EXPECT_TRUE(v == -1.0f || v == 0.0f || v == 1.0f) << v;
    sum = bfloat16_t(f(sum) + f(x[i]) * f(w[i]));
    exact += static_cast<double>(f(x[i])) * f(w[i]);
  }
  EXPECT_EQ(static_cast<double>(f(sum)), exact);
  std::vector<half_t> h(64);
  fill_block<half_t>(value_mode::exact, 9, 1, 0, 1, 0, 64, h.data());
  for (half_t v : h) EXPECT_EQ(std::fmod(f(v) * 2.0f, 1.0f), 0.0f) << f(v);
}

TEST(mixed, uniform_data_has_the_storage_dtypes_bits) {
  std::vector<bfloat16_t> x(64);
  fill_block<bfloat16_t>(value_mode::uniform, 4, 1, 0, 1, 0, 64, x.data());
  for (bfloat16_t v : x) {
    EXPECT_GE(f(v), -1.0f);
    EXPECT_LT(f(v), 1.0f);
    EXPECT_EQ(std::fmod(f(v) * 128.0f, 1.0f), 0.0f);  // multiples of 2⁻⁷
  }
}

TEST(mixed, policy_factor) {
  const precision f32{dtype::f32, dtype::f32}, bf{dtype::f32, dtype::bf16};
  // All in f32: (1+γ₃₁)(1+γ₁) − 1, at most the whole chain's γ₃₂.
  EXPECT_LE(policy_factor(31, 1, dtype::bf16, f32), gamma(32, dtype::f32));
  EXPECT_NEAR(policy_factor(31, 1, dtype::bf16, f32), gamma(32, dtype::f32), 1e-12);
  // Partials rounded to bf16 (u = 2⁻⁸) and one bf16 addition: (1+γ₃₁)(1+u)(1+γ₁(bf16)) − 1.
  const double g = gamma(31, dtype::f32), u = 0x1p-8, g1 = u / (1 - u);
  EXPECT_DOUBLE_EQ(policy_factor(31, 1, dtype::bf16, bf), (1 + g) * (1 + u) * (1 + g1) - 1);
  // No reduction: nothing rounded to bf16.
  EXPECT_NEAR(policy_factor(32, 0, dtype::bf16, bf), gamma(32, dtype::f32), 1e-16);
  // The statistical tier is smaller at long chains.
  EXPECT_LT(policy_factor_statistical(8192, 1, dtype::bf16, f32, 9.4),
            policy_factor(8192, 1, dtype::bf16, f32));
  EXPECT_THROW((void)policy_factor(1, 1, dtype::bf16, {dtype::f32, dtype::f16}), invalid_problem);
}

TEST(mixed, window_is_round_to_nearest_of_b_plus_minus_delta) {
  // b = 1.002 (f32), mag 1. bf16 around it: 0.99609375, 1, 1.0078125; the midpoints 0.998046875
  // and 1.00390625. With a tiny δ, [b − δ, b + δ] rounds to 1 at both ends: 1 alone passes.
  const float b[] = {1.002f};
  const double mag[] = {1.0};
  const bfloat16_t hit[] = {bfloat16_t(1.0f)}, up[] = {bfloat16_t(1.0078125f)};
  const bfloat16_t below[] = {next_down(bfloat16_t(1.0f))};
  EXPECT_FALSE(compare_window<bfloat16_t>(1, 1, hit, 1, b, 1, mag, 1, 1e-6, 1, false));
  for (const bfloat16_t* g : {up, below}) {
    const auto bad = compare_window<bfloat16_t>(1, 1, g, 1, b, 1, mag, 1, 1e-6, 1, false);
    ASSERT_TRUE(bad);
    EXPECT_EQ(bad->reason, "window");
    EXPECT_EQ(bad->expected, 1.0);
  }
  // δ = 0.0025 reaches past the upper midpoint (b + δ = 1.0045), not the lower (b − δ = 0.9995):
  // 1.0078125 passes, 0.99609375 not.
  EXPECT_FALSE(compare_window<bfloat16_t>(1, 1, up, 1, b, 1, mag, 1, 0.0025, 1, false));
  EXPECT_TRUE(compare_window<bfloat16_t>(1, 1, below, 1, b, 1, mag, 1, 0.0025, 1, false));
  // δ = 0.01 reaches below the lower one (0.992): both neighbours pass.
  EXPECT_FALSE(compare_window<bfloat16_t>(1, 1, below, 1, b, 1, mag, 1, 0.01, 1, false));
  // Exact mode: only round(b), bit for bit.
  EXPECT_TRUE(compare_window<bfloat16_t>(1, 1, up, 1, b, 1, mag, 1, 1e-6, 1, true));
  EXPECT_FALSE(compare_window<bfloat16_t>(1, 1, hit, 1, b, 1, mag, 1, 1e-6, 1, true));
}

TEST(mixed, window_nonfinite) {
  const double mag[] = {1.0};
  const float nan[] = {NAN}, inf[] = {INFINITY}, big[] = {65500.0f};
  const half_t got_nan[] = {std::numeric_limits<half_t>::quiet_NaN()};
  const half_t got_inf[] = {std::numeric_limits<half_t>::infinity()};
  EXPECT_FALSE(compare_window<half_t>(1, 1, got_nan, 1, nan, 1, mag, 1, 1e-6, 1, false));
  EXPECT_FALSE(compare_window<half_t>(1, 1, got_inf, 1, inf, 1, mag, 1, 1e-6, 1, false));
  EXPECT_EQ(compare_window<half_t>(1, 1, got_inf, 1, nan, 1, mag, 1, 1e-6, 1, false)->reason,
            "nonfinite");
  // 65500 ± 1000 reaches past 65504: +inf is inside the window; ± 1 it is not.
  const double wide_mag[] = {1000.0};
  EXPECT_FALSE(compare_window<half_t>(1, 1, got_inf, 1, big, 1, wide_mag, 1, 1.0, 1, false));
  EXPECT_EQ(compare_window<half_t>(1, 1, got_inf, 1, big, 1, mag, 1, 1.0, 1, false)->reason,
            "nonfinite");
}

TEST(mixed, a_partial_rounded_to_bf16_leaves_the_window_of_an_f32_reduction) {
  // Two partials that cancel, 3.0117190 and -2.9921875 (f32): their f32 sum b = 0.0195313 rounds
  // to bf16 within the window of an f32 reduction over k = 64 on mag 6, δ = (γ₆₄ + γ₆₄)·6 =
  // 4.6e-5. Rounded to bf16 first (3.015625 and -3), they sum to 0.015625: off by 3.9e-3.
  const float p0 = 3.01171875f + 0x1p-20f, p1 = -2.9921875f;
  const float b[] = {p0 + p1};
  const double mag[] = {6.0};
  const double factor =
      policy_factor(63, 1, dtype::bf16, {dtype::f32, dtype::f32}) + gamma(64, dtype::f32);
  const bfloat16_t right[] = {bfloat16_t(p0 + p1)};
  const bfloat16_t wrong[] = {bfloat16_t(f(bfloat16_t(p0)) + f(bfloat16_t(p1)))};
  EXPECT_FALSE(compare_window<bfloat16_t>(1, 1, right, 1, b, 1, mag, 1, factor, 64, false));
  EXPECT_TRUE(compare_window<bfloat16_t>(1, 1, wrong, 1, b, 1, mag, 1, factor, 64, false));
}

TEST(mixed, window_share_reads_one_at_the_edge_and_more_outside) {
  // bf16, b = 1.001, δ = 1e-6: the window is [1, 1].
  EXPECT_EQ(window_share(bfloat16_t(1.0f), 1.001, 1.0, 1e-6, 1), 1.0);
  EXPECT_NEAR(window_share(bfloat16_t(1.0078125f), 1.001, 1.0, 1e-6, 1), 0.0068125 / 0.001, 1e-9);
  EXPECT_NEAR(window_share(next_down(bfloat16_t(1.0f)), 1.001, 1.0, 1e-6, 1), 0.00490625 / 0.001,
              1e-9);
  EXPECT_EQ(window_share(bfloat16_t(1.0f), 1.0, 1.0, 1e-6, 1), 0.0);  // got = b
  // δ = 0.01: both neighbours inside; the upper edge is 1.0078125 itself.
  EXPECT_EQ(window_share(bfloat16_t(1.0078125f), 1.001, 1.0, 0.01, 1), 1.0);
}

}  // namespace
}  // namespace shardcheck::ref::test
