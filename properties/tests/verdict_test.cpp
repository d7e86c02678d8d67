// The reference in two steps (verdict.hpp staged_reference) and the judgement of a settled block:
// the staged values and magnitudes are reference_of_block's bit for bit, a block equal to its
// reference is judged without magnitudes exactly as with them, and a block that differs from it
// in one element is never judged without them.
#include <gtest/gtest.h>

#include "mpi_environment.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "shardcheck/parallel/registry.hpp"
#include "shardcheck/properties/verdict.hpp"

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
            EXPECT_EQ(st.reference().flops * 2, whole.flops);
            EXPECT_EQ(st.reference().k_ref, whole.k_ref);
            EXPECT_EQ(st.reference().panel_bytes, whole.panel_bytes);
            st.add_magnitudes();
            st.drop_panels();
            ASSERT_EQ(st.reference().mag.size(), whole.mag.size());
            EXPECT_EQ(std::memcmp(st.reference().mag.data(), whole.mag.data(),
                                  whole.mag.size() * sizeof(double)),
                      0);
            EXPECT_EQ(st.reference().flops, whole.flops);
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

}  // namespace
}  // namespace shardcheck::prop
