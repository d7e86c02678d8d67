// The shape of the error (verdict.hpp diagnose_block): each shape named on a synthetic output C
// against its reference R, and none named where it does not fit.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "shardcheck/properties/verdict.hpp"
#include "shardcheck/reference/bound.hpp"

namespace shardcheck::prop {
namespace {

constexpr std::size_t rows = 8, cols = 8, n = rows * cols;
constexpr std::int64_t K = 64;

// An f64 single layer's tolerance: the chain K/2 + 1 (row_parallel on 2 ranks) and the reference's
// K.
tolerance f64_tolerance() {
  tolerance t;
  t.type = dtype::f64;
  t.k_par = K / 2 + 1;
  t.k_ref = t.k_mag = K;
  t.rigorous = ref::gamma(t.k_par, t.type) + ref::gamma(t.k_ref, t.type);
  return t;
}

// R = P0 + P1, the sums over the two halves of the inner dimension, with mag = |P0| + |P1| + 1
// (a magnitude product at least |R|).
struct reference_parts {
  std::vector<double> r, p0, p1, mag, other;
};
reference_parts parts(unsigned seed = 1) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> d(-4, 4);
  reference_parts x;
  for (std::size_t i = 0; i < n; ++i) {
    x.p0.push_back(d(gen));
    x.p1.push_back(d(gen));
    x.r.push_back(x.p0.back() + x.p1.back());
    x.mag.push_back(std::abs(x.p0.back()) + std::abs(x.p1.back()) + 1);
    x.other.push_back(d(gen));
  }
  return x;
}

diagnosis_context context_of(const reference_parts& x) {
  diagnosis_context ctx;
  ctx.ranks = 2;
  ctx.shard_counts = {2};
  ctx.partials = {{2, 0, -1, x.p0}, {2, 1, -1, x.p1}};
  ctx.others = {{1, x.other, {}}};
  return ctx;
}

diagnosis run(const std::vector<double>& c, const reference_parts& x) {
  return diagnose_block<double>(f64_tolerance(), false, rows, cols, c.data(), x.r.data(),
                                x.mag.data(), nullptr, context_of(x));
}

TEST(ErrorShape, WithinTheBoundIsNoShape) {
  const reference_parts x = parts();
  std::vector<double> c = x.r;
  // Half of element 5's own bound, (γ_33 + γ_64)·mag: within it.
  c[5] += 0.5 * f64_tolerance().rigorous * x.mag[5];
  const diagnosis d = run(c, x);
  EXPECT_EQ(d.shape, error_shape::none);
  EXPECT_EQ(d.bad, 0);
  EXPECT_EQ(describe(d, par::block{0, rows, 0, cols}), "");
}

TEST(ErrorShape, Zero) {
  const reference_parts x = parts();
  std::vector<double> c = x.r;
  for (std::size_t i = 2 * cols; i < 4 * cols; ++i) c[i] = 0;  // rows 2-3 dropped
  const diagnosis d = run(c, x);
  EXPECT_EQ(d.shape, error_shape::zero);
  EXPECT_EQ(d.bad, 16);
  const std::string text = describe(d, par::block{10, rows, 0, cols});
  EXPECT_NE(text.find("shape: zero"), std::string::npos) << text;
  EXPECT_NE(text.find("16 of 64 elements, rows 12-13, columns 0-7"), std::string::npos) << text;
}

TEST(ErrorShape, Multiple) {
  const reference_parts x = parts();
  std::vector<double> c = x.r;
  for (std::size_t i = 0; i < n; i += 3) c[i] *= 2;
  const diagnosis d = run(c, x);
  EXPECT_EQ(d.shape, error_shape::multiple);
  EXPECT_EQ(d.k, 2);
}

// A sum divided by k (dW averaged over the whole world instead of its data-parallel group).
TEST(ErrorShape, Divided) {
  const reference_parts x = parts();
  std::vector<double> c = x.r;
  for (double& v : c) v /= 2;
  const diagnosis d = run(c, x);
  EXPECT_EQ(d.shape, error_shape::multiple);
  EXPECT_EQ(d.k, -2);
  EXPECT_NE(describe(d, par::block{0, rows, 0, cols}).find("reference/2"), std::string::npos);
}

TEST(ErrorShape, AnotherRanksBlock) {
  const reference_parts x = parts();
  const diagnosis d = run(x.other, x);
  EXPECT_EQ(d.shape, error_shape::permuted);
  EXPECT_EQ(d.rank, 1);
  EXPECT_NE(describe(d, par::block{0, rows, 0, cols}).find("holds rank 1's block"),
            std::string::npos);
}

TEST(ErrorShape, ShardsPermuted) {
  const reference_parts x = parts();
  std::vector<double> c = x.r;
  // columns in 4 shards of 2, reversed: C's shard s is R's shard 3 − s
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j)
      c[i * cols + j] = x.r[i * cols + (6 - j / 2 * 2) + j % 2];
  const diagnosis d = run(c, x);
  EXPECT_EQ(d.shape, error_shape::permuted);
  EXPECT_EQ(d.detail, "column shards (4 of 2): 0←3, 1←2, 2←1, 3←0");
}

TEST(ErrorShape, TheRanksPartitionPermuted) {
  // Rows cut by the ranks at 3 and 5: the first and last parts (3 rows each) swapped.
  const reference_parts x = parts();
  std::vector<double> c = x.r;
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < cols; ++j) {
      c[i * cols + j] = x.r[(i + 5) * cols + j];
      c[(i + 5) * cols + j] = x.r[i * cols + j];
    }
  diagnosis_context ctx = context_of(x);
  ctx.row_cuts = {3, 5};
  const diagnosis d = diagnose_block<double>(f64_tolerance(), false, rows, cols, c.data(),
                                             x.r.data(), x.mag.data(), nullptr, ctx);
  EXPECT_EQ(d.shape, error_shape::permuted);
  EXPECT_EQ(d.detail, "row parts of the ranks' partition (3, at 0 3 5) in the order 2, 1, 0");
}

TEST(ErrorShape, TheRanksPartsReordered) {
  // Rows cut by the ranks at 5 (parts of 5 and 3 rows): gathered in the other order.
  const reference_parts x = parts();
  std::vector<double> c(n);
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) c[i * cols + j] = x.r[((i + 5) % rows) * cols + j];
  diagnosis_context ctx = context_of(x);
  ctx.row_cuts = {5};
  const diagnosis d = diagnose_block<double>(f64_tolerance(), false, rows, cols, c.data(),
                                             x.r.data(), x.mag.data(), nullptr, ctx);
  EXPECT_EQ(d.shape, error_shape::shifted);
  EXPECT_EQ(d.detail, "row parts of the ranks' partition (2, at 0 5) in the order 1, 0");
}

TEST(ErrorShape, ColumnsReversed) {
  const reference_parts x = parts();
  std::vector<double> c = x.r;
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 1; j <= 5; ++j) c[i * cols + j] = x.r[i * cols + 6 - j];
  const diagnosis d = run(c, x);
  EXPECT_EQ(d.shape, error_shape::permuted);
  EXPECT_EQ(d.detail, "columns 1-5 reversed");
}

TEST(ErrorShape, ShiftedByOneShard) {
  const reference_parts x = parts();
  std::vector<double> c(n, 0.0);
  // row shards of 2 (4 shards): each holds the one before it, the first none
  for (std::size_t i = 2; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) c[i * cols + j] = x.r[(i - 2) * cols + j];
  const diagnosis d = run(c, x);
  EXPECT_EQ(d.shape, error_shape::shifted);
  EXPECT_EQ(d.detail, "row shards (4 of 2): 0←zero, 1←0, 2←1, 3←2");
}

// A pipeline lagging by three micro-batches of one row: each row holds the one three before it.
TEST(ErrorShape, ShiftedByThreeShards) {
  const reference_parts x = parts();
  std::vector<double> c(n, 0.0);
  for (std::size_t i = 3; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) c[i * cols + j] = x.r[(i - 3) * cols + j];
  const diagnosis d = run(c, x);
  EXPECT_EQ(d.shape, error_shape::shifted);
  EXPECT_EQ(d.k, 3);
  EXPECT_NE(describe(d, par::block{0, rows, 0, cols}).find("(shifted by 3 shards)"),
            std::string::npos);
}

TEST(ErrorShape, Transposed) {
  const reference_parts x = parts();
  std::vector<double> c(n);
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) c[i * cols + j] = x.r[j * cols + i];
  EXPECT_EQ(run(c, x).shape, error_shape::transposed);
}

TEST(ErrorShape, PartialOnly) {
  const reference_parts x = parts();
  const diagnosis d = run(x.p0, x);  // the reduction skipped: part 0's sum alone
  EXPECT_EQ(d.shape, error_shape::partial_only);
  EXPECT_EQ(d.part, 0);
  EXPECT_EQ(d.parts, 2);
}

TEST(ErrorShape, PartialMissing) {
  // R − P1 is P0 itself on 2 parts: with 3 parts, R − P2 is no single part.
  const reference_parts x = parts();
  std::vector<double> p2(n), c(n), r(n);
  for (std::size_t i = 0; i < n; ++i) {
    p2[i] = x.other[i];
    r[i] = x.r[i] + p2[i];
    c[i] = x.r[i];  // P0 + P1: P2 missing
  }
  reference_parts y = x;
  y.r = r;
  y.other.assign(n, 100.0);
  diagnosis_context ctx = context_of(y);
  ctx.partials = {{3, 0, -1, x.p0}, {3, 1, -1, x.p1}, {3, 2, 0, p2}};
  std::vector<double> mag(n);
  for (std::size_t i = 0; i < n; ++i) mag[i] = x.mag[i] + std::abs(p2[i]);
  const diagnosis d = diagnose_block<double>(f64_tolerance(), false, rows, cols, c.data(), r.data(),
                                             mag.data(), nullptr, ctx);
  EXPECT_EQ(d.shape, error_shape::partial_missing);
  EXPECT_EQ(d.part, 2);
  EXPECT_EQ(d.parts, 3);
  EXPECT_EQ(d.rank, 0);  // that part is rank 0's share
  EXPECT_NE(describe(d, par::block{0, rows, 0, cols}).find("rank 0's partial sum"),
            std::string::npos);
}

TEST(ErrorShape, PartialTwice) {
  const reference_parts x = parts();
  std::vector<double> c(n);
  for (std::size_t i = 0; i < n; ++i) c[i] = x.r[i] + x.p1[i];
  const diagnosis d = run(c, x);
  EXPECT_EQ(d.shape, error_shape::partial_twice);
  EXPECT_EQ(d.part, 1);
}

TEST(ErrorShape, Narrower) {
  const reference_parts x = parts();
  std::vector<double> c(n);
  for (std::size_t i = 0; i < n; ++i) c[i] = static_cast<float>(x.r[i]);  // rounded to f32
  const diagnosis d = run(c, x);
  EXPECT_EQ(d.shape, error_shape::narrower);
  EXPECT_EQ(d.detail, "f32");
}

TEST(ErrorShape, NonFinite) {
  const reference_parts x = parts();
  std::vector<double> c = x.r;
  c[9] = std::numeric_limits<double>::quiet_NaN();
  c[10] = std::numeric_limits<double>::infinity();
  const diagnosis d = run(c, x);
  EXPECT_EQ(d.shape, error_shape::nonfinite);
  EXPECT_EQ(d.detail, "1 NaN, 1 Inf");
}

TEST(ErrorShape, LostNonFinite) {
  // A product skipped where an input is 0 and its partner Inf: R has NaN (0·Inf) and Inf there,
  // C a number, or Inf where R is NaN (the other terms' Inf kept, the NaN lost).
  reference_parts x = parts();
  std::vector<double> c = x.r;
  x.r[3] = std::numeric_limits<double>::quiet_NaN();
  x.r[4] = std::numeric_limits<double>::quiet_NaN();
  c[4] = std::numeric_limits<double>::infinity();
  x.r[7] = -std::numeric_limits<double>::infinity();
  const diagnosis d = run(c, x);
  EXPECT_EQ(d.shape, error_shape::lost_nonfinite);
  EXPECT_EQ(d.detail, "2 NaN, 1 Inf");
  EXPECT_EQ(d.bad, 3);
}

TEST(ErrorShape, SameNonFiniteIsNoShape) {
  // NaN where R is NaN and the same Inf where R is Inf are within the bound: nothing to diagnose.
  reference_parts x = parts();
  x.r[3] = std::numeric_limits<double>::quiet_NaN();
  x.r[7] = std::numeric_limits<double>::infinity();
  const diagnosis d = run(x.r, x);
  EXPECT_EQ(d.shape, error_shape::none);
}

TEST(ErrorShape, Other) {
  // Off by half the magnitude: past even bf16's bound (γ_33(bf16) + γ_64 ≈ 0.15·mag), within
  // none of the shapes above.
  const reference_parts x = parts();
  std::vector<double> c = x.r;
  for (std::size_t i = 0; i < n; i += 5) c[i] += 0.5 * x.mag[i];
  const diagnosis d = run(c, x);
  EXPECT_EQ(d.shape, error_shape::other);
  EXPECT_EQ(d.bad, 13);
}

TEST(ErrorShape, ExactModeIsBitwise) {
  // Exact mode: a doubled sum of grid values is 2·R exactly; one part off by one is no shape.
  tolerance t = f64_tolerance();
  t.bitwise = true;
  const std::vector<double> r{1, 2, 3, 4}, mag{1, 2, 3, 4};
  std::vector<double> c{2, 4, 6, 8};
  diagnosis_context ctx;
  ctx.ranks = 2;
  diagnosis d =
      diagnose_block<double>(t, false, 2, 2, c.data(), r.data(), mag.data(), nullptr, ctx);
  EXPECT_EQ(d.shape, error_shape::multiple);
  c[3] = 9;
  d = diagnose_block<double>(t, false, 2, 2, c.data(), r.data(), mag.data(), nullptr, ctx);
  EXPECT_EQ(d.shape, error_shape::other);
}

TEST(ErrorShape, SixteenBitWindowZero) {
  // A bf16 single layer's window: a row left 0 is zero; the f32 reference rounded is in bound.
  tolerance t;
  t.type = dtype::bf16;
  t.window = true;
  t.k_par = t.k_ref = t.k_mag = 16;
  t.policy = precision{dtype::f32, dtype::f32};
  t.rigorous = ref::gamma(16, dtype::f32) * 2;
  const std::vector<float> b{1.5f, -2.25f, 3.0f, 0.75f};
  const std::vector<double> mag{2, 3, 4, 1};
  std::vector<bfloat16_t> c{bfloat16_t(1.5f), bfloat16_t(-2.25f), bfloat16_t(0.0f),
                            bfloat16_t(0.0f)};
  diagnosis_context ctx;
  const diagnosis d =
      diagnose_block<bfloat16_t>(t, false, 2, 2, c.data(), b.data(), mag.data(), nullptr, ctx);
  EXPECT_EQ(d.shape, error_shape::zero);
  EXPECT_EQ(d.bad, 2);
  ASSERT_EQ(d.rows.size(), 1u);
  EXPECT_EQ(d.rows[0].offset, 1);
}

}  // namespace
}  // namespace shardcheck::prop
