// The reference in two steps (verdict.hpp staged_reference) and the judgement of a settled block:
// the staged values and magnitudes are reference_of_block's bit for bit, a block equal to its
// reference is judged without magnitudes exactly as with them, and a block that differs from it
// in one element is never judged without them.
#include <gtest/gtest.h>

#include "mpi_environment.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "shardcheck/parallel/registry.hpp"
#include "shardcheck/properties/verdict.hpp"
#include "shardcheck/reference/bound.hpp"

namespace shardcheck::prop {
namespace {

using par::any_matrix;
using par::matrix;
using par::tensor;

par::run_case case_of(const std::string& line) {
  static const par::registry r = par::builtin_strategies();
  par::run_case c = par::run_case::parse(line);
  par::complete_and_validate(*r.find("data_parallel"), c);
  return c;
}

std::string line_of(const char* dtype, const char* layout, const char* mode, int seed) {
  return std::string("strategy=data_parallel p=1 M=9 N=7 K=11 dtype=") + dtype +
         " layout=" + layout + " mode=" + mode + " seed=" + std::to_string(seed) + " backend=mpi";
}

bool same_bits(const any_matrix& a, const any_matrix& b) {
  return std::visit(
      [&](const auto& x) {
        using M = std::decay_t<decltype(x)>;
        const auto* y = std::get_if<M>(&b);
        return y != nullptr && x.rows == y->rows && x.cols == y->cols &&
               std::memcmp(x.data.data(), y->data.data(), x.data.size() * sizeof(x.data[0])) == 0;
      },
      a);
}

par::block whole_block(const par::run_case& c, tensor t) {
  const auto [rows, cols] = par::dim_names(par::tensor_slot{t}, c.prob);
  return {0, par::dim_length(c.prob, rows), 0, par::dim_length(c.prob, cols)};
}

constexpr tensor outputs[] = {tensor::y, tensor::dx, tensor::dw};
constexpr const char* modes[] = {"uniform",  "wide",     "cancel", "nonfinite",
                                 "positive", "zero_inf", "exact"};

TEST(verdict, staged_reference_is_reference_of_block_bit_for_bit) {
  for (const char* dtype : {"f32", "f64"})
    for (const char* layout : {"out_in", "in_out"})
      for (const char* mode : {"uniform", "zero_inf"})
        for (const tensor t : outputs) {
          const par::run_case c = case_of(line_of(dtype, layout, mode, 5));
          const std::int64_t inner = inner_of(c.prob, t);
          par::block b = whole_block(c, t);
          b.row0 = 1;
          b.rows -= 2;
          b.col0 = 2;
          b.cols -= 3;
          for (const par::index_run part :
               {par::index_run{0, inner}, par::index_run{2, inner - 4}, par::index_run{3, 0}}) {
            SCOPED_TRACE(c.to_string() + " output " + std::to_string(static_cast<int>(t)) +
                         " part " + std::to_string(part.offset) + "+" +
                         std::to_string(part.length));
            const block_reference whole = reference_of_block(c, t, b, part);
            staged_reference st(c, t, b, part);
            EXPECT_TRUE(same_bits(st.reference().value, whole.value));
            EXPECT_TRUE(same_bits(reference_values_of_block(c, t, b, part), whole.value));
            EXPECT_TRUE(st.reference().mag.empty());
            EXPECT_TRUE(st.reference().sq.empty());
            // The value's product, then the magnitudes' (and on uniform data the squares').
            EXPECT_EQ(st.reference().flops * (whole.sq.empty() ? 2 : 3), whole.flops);
            EXPECT_EQ(whole.sq.empty(), std::string(mode) == "zero_inf");
            EXPECT_EQ(st.reference().k_ref, whole.k_ref);
            EXPECT_EQ(st.reference().panel_bytes, whole.panel_bytes);
            st.add_magnitudes();
            st.drop_panels();
            ASSERT_EQ(st.reference().mag.size(), whole.mag.size());
            EXPECT_EQ(std::memcmp(st.reference().mag.data(), whole.mag.data(),
                                  whole.mag.size() * sizeof(double)),
                      0);
            EXPECT_EQ(st.reference().flops, whole.flops);
            ASSERT_EQ(st.reference().sq.size(), whole.sq.size());
            EXPECT_EQ(std::memcmp(st.reference().sq.data(), whole.sq.data(),
                                  whole.sq.size() * sizeof(double)),
                      0);
            // Panels dropped before the magnitudes: made again, the same magnitudes.
            staged_reference again(c, t, b, part);
            again.drop_panels();
            again.add_magnitudes();
            ASSERT_EQ(again.reference().mag.size(), whole.mag.size());
            EXPECT_EQ(std::memcmp(again.reference().mag.data(), whole.mag.data(),
                                  whole.mag.size() * sizeof(double)),
                      0);
          }
        }
}

void expect_same(const judgement& a, const judgement& b) {
  EXPECT_EQ(a.first.has_value(), b.first.has_value());
  EXPECT_EQ(a.nonfinite, b.nonfinite);
  EXPECT_EQ(a.worst.err_u_mag, b.worst.err_u_mag);
  EXPECT_EQ(a.worst.rigorous, b.worst.rigorous);
  EXPECT_EQ(a.worst.statistical, b.worst.statistical);
  EXPECT_EQ(a.max_err, b.max_err);
  EXPECT_EQ(a.statistical, b.statistical);
  EXPECT_EQ(a.reference, b.reference);
}

// Every mode, dtype, layout and output, with the tier off and on: a got equal to the reference is
// judged alike with and without the magnitudes (the harness skips them only when settled).
TEST(verdict, a_settled_block_is_judged_alike_without_magnitudes) {
  int judged = 0;
  for (const char* dtype : {"f32", "f64"})
    for (const char* layout : {"out_in", "in_out"})
      for (const char* mode : modes)
        for (int seed = 1; seed <= 3; ++seed)
          for (const tensor t : outputs) {
            const par::run_case c = case_of(line_of(dtype, layout, mode, seed));
            SCOPED_TRACE(c.to_string() + " output " + std::to_string(static_cast<int>(t)));
            const block_reference whole =
                reference_of_block(c, t, whole_block(c, t), {0, inner_of(c.prob, t)});
            const any_matrix got = whole.value;
            if (!settled(got, whole.value)) continue;  // an all-zero finite block: see below
            block_reference bare = whole;
            bare.mag.clear();
            const std::vector<par::chain_lengths> chains{{c.prob.K, c.prob.N, c.prob.M, {}}};
            for (const statistical_tier tier : {statistical_tier{}, statistical_tier{8.0, 1e-9}}) {
              const tolerance tol = tolerance_of(c, chains, t, tier);
              expect_same(judge_block(tol, got, bare), judge_block(tol, got, whole));
              ++judged;
            }
          }
  EXPECT_GE(judged, 2 * 2 * 7 * 3 * 3 * 2 - 8);
}

TEST(verdict, settled_is_bit_for_bit_or_both_nan) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const auto of = [](std::vector<double> v) {
    matrix<double> m(1, v.size());
    for (std::size_t i = 0; i < v.size(); ++i) m.data[i] = v[i];
    return any_matrix(std::move(m));
  };
  EXPECT_TRUE(settled(of({1.0, -2.0, nan}), of({1.0, -2.0, -nan})));
  EXPECT_TRUE(settled(of({nan, INFINITY}), of({nan, INFINITY})));
  EXPECT_FALSE(settled(of({1.0, std::nextafter(2.0, 3.0)}), of({1.0, 2.0})));
  EXPECT_FALSE(settled(of({1.0, 0.0}), of({1.0, -0.0})));
  EXPECT_FALSE(settled(of({1.0, nan}), of({1.0, 1.0})));
  EXPECT_FALSE(settled(of({INFINITY}), of({-INFINITY})));
  // Finite and all zero: whether err/(u·mag) counts the block rests on its magnitudes.
  EXPECT_FALSE(settled(of({0.0, 0.0}), of({0.0, 0.0})));
  EXPECT_FALSE(settled(of({1.0, 2.0}), of({1.0, 2.0, 3.0})));
  matrix<float> f(1, 2);
  f.data[0] = 1.0f;
  f.data[1] = -2.0f;
  EXPECT_FALSE(settled(any_matrix(f), of({1.0, -2.0})));
  EXPECT_TRUE(settled(any_matrix(f), any_matrix(f)));
}

// One element one ulp off: never judged without magnitudes (it throws), and with them it fails
// in exact mode and enters the figures otherwise.
TEST(verdict, a_block_that_differs_is_never_judged_without_magnitudes) {
  for (const char* mode : {"uniform", "exact"}) {
    const par::run_case c = case_of(line_of("f64", "out_in", mode, 2));
    const block_reference whole =
        reference_of_block(c, tensor::y, whole_block(c, tensor::y), {0, c.prob.K});
    any_matrix got = whole.value;
    double& v = std::get<matrix<double>>(got).data[4];
    v = std::nextafter(v, INFINITY);
    EXPECT_FALSE(settled(got, whole.value));
    block_reference bare = whole;
    bare.mag.clear();
    const std::vector<par::chain_lengths> chains{{c.prob.K, c.prob.N, c.prob.M, {}}};
    const tolerance tol = tolerance_of(c, chains, tensor::y, {});
    EXPECT_THROW((void)judge_block(tol, got, bare), std::exception);
    const judgement j = judge_block(tol, got, whole);
    EXPECT_GT(j.max_err, 0.0);
    EXPECT_EQ(j.first.has_value(), c.mode == value_mode::exact);
  }
}

// --- the projection tier ------------------------------------------------------------------------

// The bounds of one projected row from its sums: the rigorous one γ·S plus the check's own
// rounding in double, the statistical one λ_v·γ̃·√(X·S) plus the same, both inflated for the
// sums' own rounding; with the statistical tier off, the statistical bound is the rigorous one.
TEST(verdict, projection_bound_of_adds_the_checks_own_rounding) {
  const double u = 0x1p-53, gamma = 1e-6, gamma_tilde = 1e-7, lambda_v = 8;
  const std::int64_t cols = 100, inner = 50;
  const int parts = 2;
  const double s = 1e4, x = 1e2, g = 3e3;
  const projection_bound b =
      projection_bound_of(s, x, g, cols, inner, parts, gamma, gamma_tilde, lambda_v);
  const auto gk = [&](std::int64_t n) { return n * u / (1 - n * u); };
  const double inflate = 1 / (1 - gk(cols + inner + parts + 2));
  const double own =
      (2 * u + 2 * gk(parts) + 2 * gk(2 * inner + 1) * gk(2 * inner + 1) + gk(cols) * gk(cols)) *
          s * inflate +
      (2 * u + gk(cols) * gk(cols)) * g * inflate;
  EXPECT_NEAR(b.rigorous, gamma * s * inflate + own, 1e-12 * b.rigorous);
  EXPECT_NEAR(b.statistical, lambda_v * gamma_tilde * std::sqrt(x * s) * inflate + own,
              1e-12 * b.statistical);
  EXPECT_LT(b.statistical, b.rigorous);
  EXPECT_GT(b.rigorous, gamma * s);  // never below the kernel's share alone
  EXPECT_LT(own, 10 * u * (s + g));  // compensated: a few u, not (C + d)·u
  const projection_bound off = projection_bound_of(s, x, g, cols, inner, parts, gamma, 0, lambda_v);
  EXPECT_EQ(off.statistical, off.rigorous);
}

// The signs: a pure function of (seed, output, vector, column), ±1, about half of each; another
// output, vector or seed draws others.
TEST(verdict, projection_signs_are_counter_based) {
  const par::run_case c = case_of(line_of("f64", "out_in", "uniform", 5));
  const auto m = static_cast<std::size_t>(projection_vectors);
  const par::index_run all{0, 4000};
  const std::vector<double> v = projection_signs(c, tensor::y, std::span(&all, 1));
  ASSERT_EQ(v.size(), 4000u * m);
  EXPECT_EQ(v, projection_signs(c, tensor::y, std::span(&all, 1)));
  std::vector<double> sums(m, 0.0);
  for (std::size_t e = 0; e < v.size(); ++e) {
    EXPECT_TRUE(v[e] == 1.0 || v[e] == -1.0);
    sums[e % m] += v[e];
  }
  for (const double sum : sums) EXPECT_LT(std::abs(sum), 400.0);  // 6.3 standard deviations
  // The vectors are not one another: each pair agrees on about half of the columns.
  for (std::size_t a = 0; a < m; ++a)
    for (std::size_t b = a + 1; b < m; ++b) {
      double agree = 0;
      for (std::size_t j = 0; j < 4000; ++j) agree += v[j * m + a] * v[j * m + b];
      EXPECT_LT(std::abs(agree), 400.0);
    }
  EXPECT_NE(v, projection_signs(c, tensor::dw, std::span(&all, 1)));
  // Columns 1000-1999 alone are the same signs as within all of them.
  const par::index_run part{1000, 1000};
  const std::vector<double> w = projection_signs(c, tensor::y, std::span(&part, 1));
  EXPECT_TRUE(std::equal(w.begin(), w.end(), v.begin() + static_cast<std::ptrdiff_t>(1000 * m)));
}

// When auto picks the projection: above 2^33 multiply-adds, for what it can judge.
TEST(verdict, auto_judges_by_projection_above_the_threshold_only) {
  par::run_case c = case_of(line_of("f64", "out_in", "uniform", 1));
  EXPECT_FALSE(judged_by_projection(c));
  c.prob.M = c.prob.N = c.prob.K = 2048;  // 2^33: not above
  EXPECT_FALSE(judged_by_projection(c));
  c.prob.K = 2049;
  EXPECT_TRUE(judged_by_projection(c));
  c.check = par::check_method::reference;
  EXPECT_FALSE(judged_by_projection(c));
  c.prob.M = c.prob.N = c.prob.K = 3;
  c.check = par::check_method::projection;
  EXPECT_TRUE(judged_by_projection(c));
  c.mode = value_mode::exact;
  EXPECT_FALSE(judged_by_projection(c));
  EXPECT_EQ(projection_declines(c), "exact mode");
  c.mode = value_mode::uniform;
  c.prob.type = dtype::bf16;
  EXPECT_FALSE(judged_by_projection(c));
  c.prob.type = dtype::f32;
  c.prob.hidden = {4};
  EXPECT_EQ(projection_declines(c), "a stack");
}

// The replay line carries check= when it is not auto; other values are refused.
TEST(verdict, check_key_round_trips_on_the_replay_line) {
  const std::string line = line_of("f64", "out_in", "uniform", 1);
  EXPECT_EQ(par::run_case::parse(line).to_string().find("check="), std::string::npos);
  const par::run_case c = par::run_case::parse(line + " check=projection");
  EXPECT_EQ(c.check, par::check_method::projection);
  EXPECT_NE(c.to_string().find(" check=projection"), std::string::npos);
  EXPECT_EQ(par::run_case::parse(c.to_string()).check, par::check_method::projection);
  EXPECT_EQ(par::run_case::parse(line + " check=auto").check, par::check_method::automatic);
  EXPECT_THROW((void)par::run_case::parse(line + " check=sampled"), invalid_problem);
}

// A block equal to its reference (a correct computation with chain K) holds both bounds, on the
// whole output and on a tiled block; one element moved by a small multiple of its magnitude
// fails; a non-finite block is declined.
TEST(verdict, projection_holds_a_correct_block_and_catches_a_wrong_one) {
  int judged = 0, caught = 0, declined = 0;
  for (const char* dtype : {"f32", "f64"})
    for (const char* layout : {"out_in", "in_out"})
      for (const char* mode : {"uniform", "wide", "cancel", "positive", "nonfinite"})
        for (int seed = 1; seed <= 3; ++seed)
          for (const tensor t : outputs) {
            const par::run_case c = case_of(line_of(dtype, layout, mode, seed));
            SCOPED_TRACE(c.to_string() + " output " + std::to_string(static_cast<int>(t)));
            const std::vector<par::chain_lengths> chains{{c.prob.K, c.prob.N, c.prob.M, {}}};
            const projection_tier pt = projection_tier_of(c, chains, true, true, true, false);
            EXPECT_GT(pt.lambda, 0.0);
            EXPECT_GT(pt.lambda_v, 0.0);
            // The per-case budget, up to the rounding of λ and λ_v in double, which
            // exp(−λ²/2) magnifies about λ²-fold.
            const double eps = std::numeric_limits<double>::epsilon();
            EXPECT_LE(pt.p_fail,
                      ref::statistical_p_fail *
                          (1 + 4 * eps *
                                   (pt.lambda * pt.lambda + pt.lambda_v * pt.lambda_v +
                                    pt.lambda_a * pt.lambda_a + pt.lambda_d * pt.lambda_d)));
            // The data-aware bound on the sign-symmetric modes alone.
            EXPECT_EQ(pt.lambda_a > 0, std::string(mode) == "uniform" ||
                                           std::string(mode) == "wide" ||
                                           std::string(mode) == "cancel");
            const tolerance tol = tolerance_of(c, chains, t, statistical_tier{pt.lambda, 0});
            par::block whole = whole_block(c, t);
            par::block tiled = whole;
            tiled.row_runs = {{0, 2}, {whole.rows - 3, 2}};
            tiled.rows = 4;
            tiled.col_runs = {{1, 3}, {whole.cols - 2, 2}};
            tiled.cols = 5;
            for (const par::block& b : {whole, tiled}) {
              const block_reference want = reference_of_block(c, t, b, {0, inner_of(c.prob, t)});
              const projection_judgement ok = project_block(c, t, b, want.value, tol, pt);
              if (ok.declined) {
                ++declined;
                continue;
              }
              ++judged;
              EXPECT_FALSE(ok.failed) << ok.err << " " << ok.rigorous << " " << ok.stat_bound;
              EXPECT_LE(ok.worst.rigorous, 1.0);
              any_matrix bad = want.value;
              // One element off by 4 times its row's rigorous projected bound (γ_{K+C+d} of the
              // row's magnitudes summed): out of the element tier's bound, and of the projection's.
              const auto nudge = [&](auto& m) {
                const std::size_t e = m.data.size() / 2, cols = m.cols, row = e / cols;
                double row_mag = 0;
                for (std::size_t q = 0; q < cols; ++q) row_mag += want.mag[row * cols + q];
                const std::int64_t n = inner_of(c.prob, t) + 2 * b.cols + 2;
                const double off = 1e-3 + 4 * ref::gamma(n, c.prob.type) * row_mag;
                using V = std::decay_t<decltype(m.data[0])>;
                m.data[e] = static_cast<V>(static_cast<double>(m.data[e]) + off);
              };
              if (auto* f = std::get_if<matrix<float>>(&bad)) nudge(*f);
              if (auto* d = std::get_if<matrix<double>>(&bad)) nudge(*d);
              const projection_judgement j = project_block(c, t, b, bad, tol, pt);
              EXPECT_TRUE(j.failed || j.declined);
              caught += j.failed ? 1 : 0;
              EXPECT_FALSE(j.failed && j.statistical && j.err > j.rigorous);
              EXPECT_TRUE(!j.failed ||
                          describe(j, tol, pt, "Y").find("[projection") != std::string::npos);
            }
          }
  EXPECT_GE(judged, 2 * 2 * 4 * 3 * 3 * 2 - 12);
  EXPECT_EQ(caught, judged);
  EXPECT_GT(declined, 0);  // the nonfinite mode's blocks with a NaN or Inf
}

// The projection's statistical tier can fail alone: one row's error between its statistical and
// rigorous bounds (f32, C = 2000 columns: the statistical bound is a tenth of the rigorous one).
TEST(verdict, projection_statistical_bound_fails_alone) {
  static const par::registry reg = par::builtin_strategies();
  par::run_case c = par::run_case::parse(
      "strategy=data_parallel p=1 M=6 N=2000 K=300 dtype=f32 layout=out_in mode=uniform seed=4 "
      "backend=mpi");
  par::complete_and_validate(*reg.find("data_parallel"), c);
  const std::vector<par::chain_lengths> chains{{c.prob.K, c.prob.N, c.prob.M, {}}};
  const projection_tier pt = projection_tier_of(c, chains, true, true, true, false);
  const tolerance tol = tolerance_of(c, chains, tensor::y, statistical_tier{pt.lambda, 0});
  const par::block b = whole_block(c, tensor::y);
  const block_reference want = reference_of_block(c, tensor::y, b, {0, c.prob.K});
  const projection_sums sums = projection_sums_of(c, tensor::y, b, {0, c.prob.K});
  any_matrix got = want.value;
  auto& m = std::get<matrix<float>>(got);
  const std::size_t row = 3;
  double ga = 0;
  for (std::size_t j = 0; j < m.cols; ++j) ga += std::abs(static_cast<double>(m.row(row)[j]));
  const projection_bound pb = projection_bound_of(
      sums.sum[row], sums.max[row], ga, b.cols, c.prob.K, 1, ref::gamma(c.prob.K, dtype::f32),
      ref::tier_gamma(c.prob.K, dtype::f32, pt.lambda), pt.lambda_v);
  ASSERT_LT(4 * pb.statistical, pb.rigorous);
  EXPECT_FALSE(judge_projection(c, tensor::y, b, got, sums, 1, tol, pt).failed);
  // The geometric mean of the two bounds, on one element of the row.
  float& e = m.row(row)[17];
  e = static_cast<float>(static_cast<double>(e) + std::sqrt(pb.statistical * pb.rigorous));
  const projection_judgement j = judge_projection(c, tensor::y, b, got, sums, 1, tol, pt);
  EXPECT_TRUE(j.failed);
  EXPECT_TRUE(j.statistical);
  EXPECT_EQ(j.row, static_cast<std::int64_t>(row));
  EXPECT_NE(describe(j, tol, pt, "Y").find("[projection, statistical]"), std::string::npos);
}

// The data-aware bound (bound.hpp data_aware_bound) judges alone where it is the sharper one: a
// long contraction of uniform f32 values (K = 16384), one element moved by the geometric mean of
// its data-aware and magnitude-based statistical bounds. The element tier and the projection
// tier both fail it as statistical; without λ_a (the magnitude-based tier alone) it passes.
TEST(verdict, data_aware_bound_fails_alone) {
  static const par::registry reg = par::builtin_strategies();
  par::run_case c = par::run_case::parse(
      "strategy=data_parallel p=1 M=4 N=8 K=16384 dtype=f32 layout=out_in mode=uniform seed=5 "
      "backend=mpi");
  par::complete_and_validate(*reg.find("data_parallel"), c);
  const std::vector<par::chain_lengths> chains{{c.prob.K, c.prob.N, c.prob.M, {}}};
  const statistical_tier tier = tier_of(c, chains, true, true, true, false);
  ASSERT_TRUE(tier.data_aware());
  EXPECT_FALSE(tier_of(c, chains, true, true, true, true).data_aware());  // P inputs
  const tolerance tol = tolerance_of(c, chains, tensor::y, tier);
  const par::block b = whole_block(c, tensor::y);
  const block_reference want = reference_of_block(c, tensor::y, b, {0, c.prob.K});
  ASSERT_EQ(want.sq.size(), want.mag.size());
  const std::vector<double> aware = data_aware_bounds(tol, want);
  ASSERT_EQ(aware.size(), want.mag.size());
  const std::size_t at = 13;
  const double plain = tol.statistical * want.mag[at] / (1 - ref::gamma(tol.k_mag, dtype::f64));
  ASSERT_LT(4 * aware[at], plain);
  any_matrix got = want.value;
  auto& m = std::get<matrix<float>>(got);
  EXPECT_FALSE(judge_block(tol, got, want).first.has_value());
  float& e = m.data[at];
  e = static_cast<float>(static_cast<double>(e) + std::sqrt(aware[at] * plain));
  const judgement j = judge_block(tol, got, want);
  ASSERT_TRUE(j.first.has_value());
  EXPECT_TRUE(j.statistical);
  EXPECT_EQ(j.first->row * b.cols + j.first->col, at);
  EXPECT_NE(describe(j, tol, "Y").find("data-aware"), std::string::npos);
  tolerance plain_tol = tol;
  plain_tol.tier.lambda_a = plain_tol.tier.lambda_d = 0;
  EXPECT_FALSE(judge_block(plain_tol, got, want).first.has_value());
  // The projection tier on the same block: one element of a row moved by the geometric mean of
  // the row's two statistical bounds.
  const projection_tier pt = projection_tier_of(c, chains, true, true, true, false);
  ASSERT_GT(pt.lambda_a, 0.0);
  const projection_sums sums = projection_sums_of(c, tensor::y, b, {0, c.prob.K});
  ASSERT_EQ(sums.sq.size(), static_cast<std::size_t>(b.rows));
  got = want.value;
  auto& pm = std::get<matrix<float>>(got);
  const std::size_t row = at / b.cols;
  double ga = 0;
  for (std::size_t j = 0; j < pm.cols; ++j) ga += std::abs(static_cast<double>(pm.row(row)[j]));
  const projection_bound pb = projection_bound_of(
      sums.sum[row], sums.max[row], ga, b.cols, c.prob.K, 1, ref::gamma(c.prob.K, dtype::f32),
      ref::tier_gamma(c.prob.K, dtype::f32, pt.lambda), pt.lambda_v);
  const double da = projection_data_aware_of(sums.sq[row], sums.sum[row], sums.max[row], ga, b.cols,
                                             c.prob.K, 1, c.prob.K, dtype::f32, pt);
  ASSERT_LT(4 * da, pb.statistical);
  float& pe = pm.row(row)[3];
  pe = static_cast<float>(static_cast<double>(pe) + std::sqrt(da * pb.statistical));
  const projection_judgement pj = judge_projection(c, tensor::y, b, got, sums, 1, tol, pt);
  EXPECT_TRUE(pj.failed);
  EXPECT_TRUE(pj.statistical);
  EXPECT_EQ(pj.row, static_cast<std::int64_t>(row));
  projection_tier plain_pt = pt;
  plain_pt.lambda_a = plain_pt.lambda_d = 0;
  EXPECT_FALSE(judge_projection(c, tensor::y, b, got, sums, 1, tol, plain_pt).failed);
}

}  // namespace
}  // namespace shardcheck::prop
