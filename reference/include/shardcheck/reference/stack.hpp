#pragma once
// A stack of L linear layers — the single-device reference and the per-element bound that a
// parallel computation of it is judged by. Widths d_0 = K → d_1 … → d_L = N; W_l is d_l×d_{l−1}
// (out_in) or d_{l−1}×d_l (in_out), row-major; f between layers, none after the last:
//   H_l = A_{l−1}·W_lᵀ (A_0 = X),  A_l = f(H_l) for l < L,  Y = H_L.
// Backward from dY: dH_L = dY;  dA_{l−1} = dH_l·W_l;  dH_{l−1} = dA_{l−1} ⊙ f'(H_{l−1});
//   dW_l = dH_lᵀ·A_{l−1};  dX = dA_0.
// f is identity or ReLU: relu(h) = h > 0 ? h : 0, and relu'(h) = h > 0 (NaN stays NaN in both),
// the convention every strategy must share. L = 1 is exactly the linear layer of gemm.hpp.
// The bound is derived in bound.hpp.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "shardcheck/reference/types.hpp"

namespace shardcheck::ref {

struct stack_shape {
  weight_layout layout = weight_layout::out_in;
  std::vector<std::int64_t> widths;  // d_0 … d_L, L ≥ 1
  activation act = activation::identity;
  [[nodiscard]] std::size_t layers() const { return widths.size() - 1; }
  [[nodiscard]] std::size_t width(std::size_t l) const {
    return static_cast<std::size_t>(widths[l]);
  }
  // Elements of W_l (l = 1 … L).
  [[nodiscard]] std::size_t weight_size(std::size_t l) const { return width(l) * width(l - 1); }
};

// The longest chain of additions behind one element of each product of one computation, per
// layer l = 1 … L (index l − 1): h[l] of H_l, da[l] of dA_{l−1} (da[0] is dX), dw[l] of dW_l.
// The reference's are the contraction lengths: d_{l−1}, d_l and the rows.
struct stack_chains {
  std::vector<std::int64_t> h, da, dw;
  // The share of each chain added across ranks (in a 16-bit case's reduce dtype); empty or 0:
  // every addition local.
  std::vector<std::int64_t> h_red, da_red, dw_red;
};

// A stack stored in bf16 or f16 (mixed.hpp), computed as a 16-bit kernel does: the inputs widened
// to f32 (T = float), each product summed in f32, and every tensor between the layers stored in
// `storage` as it is formed — H_l (l < L, so A_l = f(H_l) too) and dA_l (l ≥ 1) — while Y, dX
// and dW_l stay f32 (the caller's window rounds them once). The parallel computation's products
// follow `policy` (policy_factor, each chain split by its *_red share); the reference sums in f32.
// A hidden element's two values differ after the rounding by what rounding can make of its
// bound: |par − ref| ≤ d before gives round(par) between round(ref − d) and round(ref + d), often
// round(ref) itself (bound 0). Example: bf16, H = 1.00390625 ± 2⁻²⁰ rounds to 1 for both.
struct stack_storage {
  dtype storage = dtype::bf16;
  precision policy{};
};
[[nodiscard]] stack_chains reference_chains(const stack_shape& s, std::int64_t rows);

// Exact mode's values are j·2^−g, |j| ≤ 2^g (data.hpp): multiples of 1/8 (g = 3) unless a
// stack's long contractions need a coarser grid. Its sums stay exact when the largest magnitude of
// any partial sum, in units of its grid 2^{−g(L+1)}, fits a significand of `digits` bits; `rows`
// contracts in dW. exact_grid: the finest such g ≤ 3, or −1 if not even g = 0 (values −1, 0, 1)
// keeps them exact. A single layer at K = 2¹⁸ in f32 (24 digits): 2¹⁸·2⁶ = 2²⁴, g = 3; widths
// 4096 → 200 → 50 on 64 rows: g = 3 would need 28.6 bits (H_2), g = 2 25.6, g = 1 fits (22.6).
// Another storage dtype passes its own significand (bf16: 8, fp16: 11 digits); bf16 and f16 use
// fixed grids of their own (bf16 g = 0, values −1, 0, 1; f16 g = 1, multiples of 1/2; data.hpp).
inline constexpr int exact_finest_grid = 3;
[[nodiscard]] int exact_grid(const stack_shape& s, std::int64_t rows, int digits);
// exact_grid of problem p in its dtype (f32: 24 digits, f64: 53).
[[nodiscard]] int exact_grid_of(const problem& p);
// Why exact mode would round even at the coarsest grid (g = 0; bf16 and f16 at their own grid),
// or "" if some grid keeps the stack's sums exact. bf16, K = 16 → 16 → 8 on 8 rows: H_2's sums
// reach 16·16 = 2⁸, which fits bf16's 8 bits; at K = 32 they would need 9.
[[nodiscard]] std::string exact_stack_problem(const stack_shape& s, std::int64_t rows, dtype t);

// The reference values and, per element, the bound on |parallel − reference| for a parallel
// computation with chains `par`, on `rows` rows of X and dY (all of them for the dW to mean dW).
template <class T>
struct stack_expectation {
  std::vector<T> y, dx;                   // rows×d_L, rows×d_0
  std::vector<std::vector<T>> dw;         // per layer, laid out like W_l
  std::vector<double> y_bound, dx_bound;  // per element
  std::vector<std::vector<double>> dw_bound;
  // The magnitude products Mag (|X|·|W_1|ᵀ·…, as bounded through the layers; bound.hpp), per
  // element, un-inflated: the unit in which errors are reported (err / (u·mag)).
  std::vector<double> y_mag, dx_mag;
  std::vector<std::vector<double>> dw_mag;
  // The statistical tier's bounds, when a caller asks for them (a second stack_expect at λ > 0);
  // empty otherwise.
  std::vector<double> y_stat_bound, dx_stat_bound;
  std::vector<std::vector<double>> dw_stat_bound;
};

// ws[l − 1] is W_l. dy may be null: then only Y and its bound are computed. λ > 0: the bounds of
// the statistical tier (bound.hpp), γ̃_k(λ) in place of γ_k in the same induction — it holds
// whenever every product's every element holds its γ̃ bound, so the events of a union bound are
// every layer's products' elements × their chains. `storage` (T = float, t = f32): a 16-bit
// stack as above.
template <class T>
[[nodiscard]] stack_expectation<T> stack_expect(const stack_shape& s, std::size_t rows, const T* x,
                                                std::span<const T* const> ws, const T* dy,
                                                const stack_chains& par, dtype t, double lambda = 0,
                                                const stack_storage* storage = nullptr);

// The forward pass alone, for strategies and tests: Y (rows×d_L) and, if `hidden` is not null,
// the pre-activations H_1 … H_{L−1}.
template <class T>
void stack_forward(const stack_shape& s, std::size_t rows, const T* x, std::span<const T* const> ws,
                   T* y, std::vector<std::vector<T>>* hidden);

// f and f' applied in place: a = f(h); g = g ⊙ f'(h).
template <class T>
void activate(activation a, std::span<T> h);
template <class T>
void activate_backward(activation a, std::span<const T> h, std::span<T> g);

}  // namespace shardcheck::ref
