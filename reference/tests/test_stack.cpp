#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "naive.hpp"
#include "shardcheck/reference/bound.hpp"
#include "shardcheck/reference/gemm.hpp"
#include "shardcheck/reference/mixed.hpp"
#include "shardcheck/reference/stack.hpp"

namespace shardcheck::ref {
namespace {

template <class T>
std::vector<T> data(value_mode mode, std::uint64_t seed, std::uint32_t id, std::size_t rows,
                    std::size_t cols, int grid) {
  std::vector<T> v(rows * cols);
  fill_block<T>(mode, seed, id, 0, rows, 0, cols, v.data(), 0, grid);
  return v;
}

template <class T>
struct stack_data {
  std::vector<T> x, dy;
  std::vector<std::vector<T>> w;
  std::vector<const T*> ws;
};

template <class T>
stack_data<T> make(const stack_shape& s, std::size_t rows, value_mode mode, std::uint64_t seed,
                   int grid = 3) {
  stack_data<T> d;
  d.x = data<T>(mode, seed, 1, rows, s.width(0), grid);
  d.dy = data<T>(mode, seed, 3, rows, s.width(s.layers()), grid);
  for (std::size_t l = 1; l <= s.layers(); ++l)
    d.w.push_back(data<T>(mode, seed, static_cast<std::uint32_t>(100 + l),
                          s.layout == weight_layout::out_in ? s.width(l) : s.width(l - 1),
                          s.layout == weight_layout::out_in ? s.width(l - 1) : s.width(l), grid));
  for (const auto& w : d.w) d.ws.push_back(w.data());
  return d;
}

// A second computation of the stack: naive loops summing in reverse order, so its chains are
// the reference's but its roundings differ. `act` may differ from s.act (a broken computation).
// `store`, if given, rounds each hidden tensor as it is formed (H_l for l < L, dA_l for l ≥ 1),
// as a 16-bit kernel stores them.
template <class T>
struct naive_result {
  std::vector<T> y, dx;
  std::vector<std::vector<T>> dw;
};
template <class T>
naive_result<T> naive_stack(const stack_shape& s, std::size_t rows, const stack_data<T>& d,
                            activation act, void (*store)(std::vector<T>&) = nullptr) {
  const std::size_t L = s.layers();
  auto w_at = [&](std::size_t l, std::size_t o, std::size_t i) -> std::size_t {
    return s.layout == weight_layout::out_in ? o * s.width(l - 1) + i : i * s.width(l) + o;
  };
  std::vector<std::vector<T>> a{d.x}, h;
  for (std::size_t l = 1; l <= L; ++l) {
    const auto dl = s.width(l), dp = s.width(l - 1);
    std::vector<T> out(rows * dl, T(0));
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t o = 0; o < dl; ++o) {
        T acc = 0;
        for (std::size_t i = dp; i-- > 0;) acc += a.back()[r * dp + i] * d.w[l - 1][w_at(l, o, i)];
        out[r * dl + o] = acc;
      }
    if (l < L && store != nullptr) store(out);
    h.push_back(out);
    if (l < L) activate<T>(act, std::span<T>(out));
    a.push_back(out);
  }
  naive_result<T> res;
  res.y = a.back();
  std::vector<T> g = d.dy;
  res.dw.resize(L);
  for (std::size_t l = L; l >= 1; --l) {
    const auto dl = s.width(l), dp = s.width(l - 1);
    res.dw[l - 1].assign(dl * dp, T(0));
    for (std::size_t o = 0; o < dl; ++o)
      for (std::size_t i = 0; i < dp; ++i) {
        T acc = 0;
        for (std::size_t r = rows; r-- > 0;) acc += g[r * dl + o] * a[l - 1][r * dp + i];
        res.dw[l - 1][w_at(l, o, i)] = acc;
      }
    std::vector<T> da(rows * dp, T(0));
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t i = 0; i < dp; ++i) {
        T acc = 0;
        for (std::size_t o = dl; o-- > 0;) acc += g[r * dl + o] * d.w[l - 1][w_at(l, o, i)];
        da[r * dp + i] = acc;
      }
    if (l == 1) {
      res.dx = da;
      break;
    }
    if (store != nullptr) store(da);
    activate_backward<T>(act, std::span<const T>(h[l - 2]), std::span<T>(da));
    g = da;
  }
  return res;
}

// The first element where |got − want| exceeds the bound (or a NaN disagrees), or −1.
template <class T>
std::ptrdiff_t first_outside(const std::vector<T>& got, const std::vector<T>& want,
                             const std::vector<double>& bound) {
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    if (std::isnan(w) || std::isnan(g)) {
      if (std::isnan(w) != std::isnan(g)) return static_cast<std::ptrdiff_t>(i);
      continue;
    }
    if (g == w) continue;
    if (!(std::fabs(g - w) <= bound[i])) return static_cast<std::ptrdiff_t>(i);
  }
  return -1;
}

template <class T>
int violations(const stack_shape& s, std::size_t rows, const stack_data<T>& d,
               const naive_result<T>& got) {
  const auto e =
      stack_expect<T>(s, rows, d.x.data(), d.ws, d.dy.data(),
                      reference_chains(s, static_cast<std::int64_t>(rows)), dtype_of<T>());
  int bad = first_outside(got.y, e.y, e.y_bound) >= 0;
  bad += first_outside(got.dx, e.dx, e.dx_bound) >= 0;
  for (std::size_t l = 0; l < s.layers(); ++l)
    bad += first_outside(got.dw[l], e.dw[l], e.dw_bound[l]) >= 0;
  return bad;
}

const std::vector<std::vector<std::int64_t>> widths = {
    {6, 4}, {5, 7, 3}, {13, 1, 9, 4}, {17, 0, 3}, {31, 29, 37}, {3, 64, 2}, {20, 20, 20, 20}};

TEST(stack, one_layer_is_the_linear_layer_with_its_bound) {
  const stack_shape s{weight_layout::in_out, {7, 5}, activation::relu};
  const auto d = make<float>(s, 9, value_mode::uniform, 3);
  const auto e =
      stack_expect<float>(s, 9, d.x.data(), d.ws, d.dy.data(), reference_chains(s, 9), dtype::f32);
  std::vector<float> y(9 * 5);
  std::vector<double> mag(9 * 5);
  linear_forward<float>(s.layout, 9, 5, 7, d.x.data(), d.w[0].data(), y.data());
  magnitude_forward<float>(s.layout, 9, 5, 7, d.x.data(), d.w[0].data(), mag.data());
  EXPECT_EQ(e.y, y);
  for (std::size_t i = 0; i < y.size(); ++i) {
    const double closed = (2 * gamma(7, dtype::f32)) * mag[i];
    EXPECT_GE(e.y_bound[i], closed);
    EXPECT_LE(e.y_bound[i], closed * (1 + 1e-12));
  }
}

TEST(stack, two_layer_forward_bound_is_the_closed_form) {
  const stack_shape s{weight_layout::out_in, {5, 7, 3}, activation::identity};
  const auto d = make<float>(s, 4, value_mode::uniform, 1);
  stack_chains par = reference_chains(s, 4);
  par.h = {2, 9};
  const auto e = stack_expect<float>(s, 4, d.x.data(), d.ws, nullptr, par, dtype::f32);
  // Mag = |X|·|W1|ᵀ·|W2|ᵀ
  std::vector<double> ax(d.x.size()), aw1(d.w[0].size()), aw2(d.w[1].size()), m1(4 * 7), m2(4 * 3);
  for (std::size_t i = 0; i < ax.size(); ++i) ax[i] = std::fabs(d.x[i]);
  for (std::size_t i = 0; i < aw1.size(); ++i) aw1[i] = std::fabs(d.w[0][i]);
  for (std::size_t i = 0; i < aw2.size(); ++i) aw2[i] = std::fabs(d.w[1][i]);
  linear_forward<double>(s.layout, 4, 7, 5, ax.data(), aw1.data(), m1.data());
  linear_forward<double>(s.layout, 4, 3, 7, m1.data(), aw2.data(), m2.data());
  const double g = [] {
    const double gp = (1 + gamma(2, dtype::f32)) * (1 + gamma(9, dtype::f32)) - 1;
    const double gr = (1 + gamma(5, dtype::f32)) * (1 + gamma(7, dtype::f32)) - 1;
    return gp + gr;
  }();
  for (std::size_t i = 0; i < m2.size(); ++i) {
    EXPECT_GE(e.y_bound[i], g * m2[i] * (1 - 1e-12));
    EXPECT_LE(e.y_bound[i], g * m2[i] * (1 + 1e-12));
  }
}

TEST(stack, a_different_order_stays_within_the_bound) {
  for (const auto& wd : widths)
    for (activation act : {activation::identity, activation::relu})
      for (weight_layout layout : test::layouts)
        for (value_mode mode : {value_mode::uniform, value_mode::wide, value_mode::cancel})
          for (std::uint64_t seed : {1u, 2u, 3u}) {
            const stack_shape s{layout, wd, act};
            const auto d = make<float>(s, 11, mode, seed);
            EXPECT_EQ(violations(s, 11, d, naive_stack(s, 11, d, act)), 0)
                << "layers " << s.layers() << " act " << to_string(act) << " mode "
                << to_string(mode) << " seed " << seed;
          }
}

template <class T>
int exact_cases_bitwise() {
  int ran = 0;
  for (const auto& wd : widths)
    for (activation act : {activation::identity, activation::relu}) {
      const stack_shape s{weight_layout::out_in, wd, act};
      const int grid = exact_grid(s, 11, std::numeric_limits<T>::digits);
      if (grid < 0) continue;
      ++ran;
      const auto d = make<T>(s, 11, value_mode::exact, 5, grid);
      const auto got = naive_stack(s, 11, d, act);
      const auto e = stack_expect<T>(s, 11, d.x.data(), d.ws, d.dy.data(), reference_chains(s, 11),
                                     dtype_of<T>());
      EXPECT_EQ(got.y, e.y);
      EXPECT_EQ(got.dx, e.dx);
      EXPECT_EQ(got.dw, e.dw);
    }
  return ran;
}

TEST(stack, exact_mode_is_bitwise) {
  EXPECT_EQ(exact_cases_bitwise<double>(), static_cast<int>(2 * widths.size()));
  EXPECT_EQ(exact_cases_bitwise<float>(), static_cast<int>(2 * widths.size()));
}

// A coarser grid where a finer one could round: a stack 4096 → 200 → 50 on 64 rows in f32 is
// exact at g = 1 (its bitwise run below), and the shapes f32 refused at g = 3 run.
TEST(stack, exact_mode_coarsens_its_grid_for_long_contractions) {
  const stack_shape s{weight_layout::out_in, {4096, 200, 50}, activation::relu};
  EXPECT_EQ(exact_grid(s, 64, 24), 1);
  EXPECT_EQ(exact_grid(s, 64, 53), 3);
  const stack_shape small{weight_layout::out_in, {400, 200, 40}, activation::identity};
  const int grid = exact_grid(small, 7, 24);
  EXPECT_EQ(grid, 2);
  const auto d = make<float>(small, 7, value_mode::exact, 3, grid);
  const auto got = naive_stack(small, 7, d, activation::identity);
  const auto e = stack_expect<float>(small, 7, d.x.data(), d.ws, d.dy.data(),
                                     reference_chains(small, 7), dtype::f32);
  EXPECT_EQ(got.y, e.y);
  EXPECT_EQ(got.dx, e.dx);
  EXPECT_EQ(got.dw, e.dw);
}

TEST(stack, exact_mode_refuses_sums_that_could_round) {
  // H_2 of 200 → 200 → 3 needs 15.3 bits and 3g of grid: g = 2 in f32, 3 in f64.
  const stack_shape s{weight_layout::out_in, {200, 200, 3}, activation::relu};
  EXPECT_EQ(exact_grid(s, 10, 24), 2);
  EXPECT_EQ(exact_grid(s, 10, 53), 3);
  EXPECT_EQ(exact_stack_problem(s, 10, dtype::f32), "");
  // One layer: K·2^{2g} ≤ 2²⁴, as for the linear layer; at g = 0 (values −1, 0, 1) up to 2²⁴.
  const auto one = [](std::int64_t k) {
    return stack_shape{weight_layout::out_in, {k, 1}, activation::identity};
  };
  EXPECT_EQ(exact_grid(one(1 << 18), 1, 24), 3);
  EXPECT_EQ(exact_grid(one((1 << 18) + 1), 1, 24), 2);
  EXPECT_EQ(exact_grid(one(1 << 24), 1, 24), 0);
  EXPECT_EQ(exact_grid(one((1 << 24) + 1), 1, 24), -1);
  EXPECT_EQ(exact_stack_problem(one(1 << 24), 1, dtype::f32), "");
  EXPECT_NE(exact_stack_problem(one((1 << 24) + 1), 1, dtype::f32), "");
  // Three layers of 4096 in f32: 2³⁶ even at g = 0.
  EXPECT_NE(
      exact_stack_problem({weight_layout::out_in, {4096, 4096, 4096, 4096}, activation::identity},
                          4, dtype::f32),
      "");
}

// The bound can fail: a computation that forgets the ReLU is caught.
TEST(stack, a_missing_activation_is_outside_the_bound) {
  const stack_shape s{weight_layout::out_in, {5, 7, 3}, activation::relu};
  const auto d = make<double>(s, 6, value_mode::uniform, 2);
  EXPECT_GT(violations(s, 6, d, naive_stack(s, 6, d, activation::identity)), 0);
}

// Near-zero pre-activations make the ReLU branch uncertain (cancel mode puts many H near 0); the
// bound must still hold for a computation that rounds differently.
TEST(stack, relu_on_cancelling_data_stays_within_the_bound) {
  const stack_shape s{weight_layout::in_out, {40, 30, 20, 10}, activation::relu};
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    const auto d = make<float>(s, 16, value_mode::cancel, seed);
    EXPECT_EQ(violations(s, 16, d, naive_stack(s, 16, d, activation::relu)), 0) << seed;
  }
}

// A pre-activation of −Inf (from an infinite input, so its bound is infinite, not NaN) is masked
// by both computations, since non-finite sums do not depend on their order: the masked unit's dW2
// is 0 with a bound of 0, not NaN (∞·0) from an uncertain branch.
TEST(stack, an_infinite_pre_activation_takes_a_certain_branch) {
  const stack_shape s{weight_layout::out_in, {1, 2, 1}, activation::relu};
  const double inf = INFINITY;
  const std::vector<double> x{-inf}, w1{1, -1}, w2{1, 1}, dy{1};
  const std::vector<const double*> ws{w1.data(), w2.data()};
  const auto e =
      stack_expect<double>(s, 1, x.data(), ws, dy.data(), reference_chains(s, 1), dtype::f64);
  EXPECT_EQ(e.dw[1][0], 0.0);
  EXPECT_EQ(e.dw_bound[1][0], 0.0);
}

// --- 16-bit stacks (stack_storage): hidden tensors stored in bf16 / f16 ----------------------

template <class S>
void store_in(std::vector<float>& v) {
  for (float& x : v) x = static_cast<float>(static_cast<S>(x));
}

// Data of a 16-bit case, held in float: each value rounded to S (its products are exact in f32).
template <class S>
stack_data<float> make16(const stack_shape& s, std::size_t rows, value_mode mode,
                         std::uint64_t seed) {
  stack_data<float> d = make<float>(s, rows, mode, seed);
  store_in<S>(d.x);
  store_in<S>(d.dy);
  for (auto& w : d.w) store_in<S>(w);
  return d;
}

// Elements of a 16-bit computation's f32 values (before their last rounding) outside the
// bounds of stack_expect, with the hidden tensors stored in S (`stored`) or not.
template <class S>
int violations16(const stack_shape& s, std::size_t rows, const stack_data<float>& d,
                 const naive_result<float>& got, bool stored) {
  const stack_storage st{dtype_of<S>(), {}};
  const auto e = stack_expect<float>(s, rows, d.x.data(), d.ws, d.dy.data(),
                                     reference_chains(s, static_cast<std::int64_t>(rows)),
                                     dtype::f32, 0, stored ? &st : nullptr);
  int bad = first_outside(got.y, e.y, e.y_bound) >= 0;
  bad += first_outside(got.dx, e.dx, e.dx_bound) >= 0;
  for (std::size_t l = 0; l < s.layers(); ++l)
    bad += first_outside(got.dw[l], e.dw[l], e.dw_bound[l]) >= 0;
  return bad;
}

template <class S>
void a_stored_computation_stays_within(std::initializer_list<value_mode> modes) {
  for (const auto& wd : widths)
    for (activation act : {activation::identity, activation::relu})
      for (weight_layout layout : test::layouts)
        for (value_mode mode : modes)
          for (std::uint64_t seed : {1u, 2u, 3u}) {
            const stack_shape s{layout, wd, act};
            const auto d = make16<S>(s, 11, mode, seed);
            EXPECT_EQ(violations16<S>(s, 11, d, naive_stack(s, 11, d, act, store_in<S>), true), 0)
                << "layers " << s.layers() << " act " << to_string(act) << " mode "
                << to_string(mode) << " seed " << seed;
          }
}

TEST(stack16, a_computation_storing_its_hidden_tensors_stays_within_the_bound) {
  a_stored_computation_stays_within<bfloat16_t>(
      {value_mode::uniform, value_mode::wide, value_mode::cancel});
  a_stored_computation_stays_within<half_t>({value_mode::uniform});
}

// The negative: judged by the f32 stack's bound (hidden tensors not stored), the same
// computation is outside it, so the reference must store what the kernel stores.
TEST(stack16, the_f32_bound_misses_the_stored_hidden_tensors) {
  int bad = 0;
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    const stack_shape s{weight_layout::out_in, {31, 29, 37}, activation::relu};
    const auto d = make16<bfloat16_t>(s, 11, value_mode::uniform, seed);
    bad += violations16<bfloat16_t>(
        s, 11, d, naive_stack(s, 11, d, activation::relu, store_in<bfloat16_t>), false);
  }
  EXPECT_GT(bad, 0);
}

// A hidden element's bound after its rounding: 0 where both values round alike, the gap to the
// next bf16 value where the reference sits on a tie. 1 row, K = 2, H = 1, N = 1, W_2 = 1:
// H = 1 + 0.25 rounds to 1.25 however the sum went (Y's bound a few f32 units); H = 1 + 2⁻⁸
// is a tie, rounded to 1 by the reference and maybe to 1.0078125 by another order: 2⁻⁷.
TEST(stack16, a_stored_elements_bound_is_what_rounding_can_make_of_it) {
  const stack_shape s{weight_layout::out_in, {2, 1, 1}, activation::identity};
  const stack_storage st{dtype::bf16, {}};
  const std::vector<float> w1{1.0f, 1.0f}, w2{1.0f}, dy{1.0f};
  const std::vector<const float*> ws{w1.data(), w2.data()};
  const auto y_bound = [&](float x1) {
    const std::vector<float> x{1.0f, x1};
    return stack_expect<float>(s, 1, x.data(), ws, dy.data(), reference_chains(s, 1), dtype::f32, 0,
                               &st)
        .y_bound[0];
  };
  EXPECT_LT(y_bound(0.25f), 1e-6);
  EXPECT_GE(y_bound(0x1p-8f), 0x1p-7);
  EXPECT_LT(y_bound(0x1p-8f), 0x1p-7 + 1e-6);
}

// Exact mode in bf16 (values −1, 0, 1) and f16 (multiples of 1/2): every partial sum of H_2 of
// 16 → 16 → 8 fits (16·16 = 2⁸ in bf16, ·2³ of grid = 2¹¹ in f16); at K = 32 neither does.
TEST(stack16, exact_mode_in_16_bits_takes_its_own_grid) {
  const stack_shape fits{weight_layout::out_in, {16, 16, 8}, activation::relu};
  const stack_shape rounds{weight_layout::out_in, {32, 16, 8}, activation::relu};
  EXPECT_EQ(exact_stack_problem(fits, 8, dtype::bf16), "");
  EXPECT_EQ(exact_stack_problem(fits, 8, dtype::f16), "");
  EXPECT_NE(exact_stack_problem(rounds, 8, dtype::bf16), "");
  EXPECT_NE(exact_stack_problem(rounds, 8, dtype::f16), "");
  // One layer: the single-layer limits (exact_limit), K = 256 in bf16 and 512 in f16.
  const auto one = [](std::int64_t k) {
    return stack_shape{weight_layout::out_in, {k, 1}, activation::identity};
  };
  EXPECT_EQ(exact_stack_problem(one(256), 1, dtype::bf16), "");
  EXPECT_NE(exact_stack_problem(one(257), 1, dtype::bf16), "");
  EXPECT_EQ(exact_stack_problem(one(512), 1, dtype::f16), "");
  EXPECT_NE(exact_stack_problem(one(513), 1, dtype::f16), "");
}

}  // namespace
}  // namespace shardcheck::ref
