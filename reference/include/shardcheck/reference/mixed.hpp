#pragma once
// Mixed precision: the 16-bit storage dtypes (Eigen's bfloat16 and half, from <Eigen/Core>), the
// reference's widening and rounding, and the verdict for a case stored in them.
//
// The reference for a bf16/f16 case widens X and W to f32 (a product of two 8- or 11-bit
// significands fits f32's 24 bits: it is exact), sums in f32 on OpenBLAS (sgemm on the widened
// copies), keeps that f32 value b, and rounds it to the storage dtype.
//
// The verdict (a window). Let s be the exact sum and mag = Σ|x_i||w_i|. The reference's b has
// |b − s| ≤ γ_K(u_f32)·mag. The parallel computation's value a before its last rounding has
// |a − s| ≤ f_par·mag, where f_par follows its declared policy and its chain split into a local
// part k_loc (summed in the accumulation dtype) and a reduction part k_red (added in the reduce
// dtype):
//   f_par = (1 + γ_k_loc(u_acc))·(1 + ρ)·(1 + γ_k_red(u_reduce)) − 1,
// ρ = u_reduce when the partials are rounded from acc to a coarser reduce dtype before they travel
// (acc=f32 reduce=bf16), else 0. So |a − b| ≤ δ = (f_par + γ_K(u_f32))·mag, and since rounding
// to nearest is monotone, got = round(a) lies in [round(b − δ), round(b + δ)] in the storage
// dtype. Where δ is far below half an ulp of b (no cancellation), that is round(b) alone, unless b
// lies within δ of a rounding boundary: one partial rounded to bf16 on its way is then caught
// wherever it changes the stored result at all. (It assumes the kernel's one last rounding, to
// the storage dtype, is to nearest, ties to even, as Eigen's and every framework's conversion
// is; a kernel that truncates fails.)
// Example: bf16, K = 64 on 2 ranks, acc=f32 reduce=f32: k_loc = 32, k_red = 1, δ ≈ 97·2⁻²⁴·mag,
// far below bf16's half ulp (2⁻⁹·|b|) unless the sum cancels: a correct kernel mostly gives
// exactly round(b), and one that rounds its partials to bf16 while declaring reduce=f32 moves got
// out of the window as soon as that rounding crosses a bf16 rounding boundary of b.
#include <Eigen/Core>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <type_traits>

#include "shardcheck/reference/check.hpp"
#include "shardcheck/reference/types.hpp"

namespace shardcheck {

using bfloat16_t = Eigen::bfloat16;
using half_t = Eigen::half;

template <>
constexpr dtype dtype_of<bfloat16_t>() {
  return dtype::bf16;
}
template <>
constexpr dtype dtype_of<half_t>() {
  return dtype::f16;
}

template <class T>
inline constexpr bool is_16bit_v = std::is_same_v<T, bfloat16_t> || std::is_same_v<T, half_t>;
// The dtype a T's sums are formed in under acc=f32: float for the 16-bit dtypes, T itself
// otherwise (wide_t<bfloat16_t> is float, wide_t<double> double).
template <class T>
using wide_t = std::conditional_t<is_16bit_v<T>, float, T>;

}  // namespace shardcheck

namespace shardcheck::ref {

// Exact mode's contraction limit in dtype t: sums of up to this many products stay exact in t
// itself (data.hpp: bf16 values {-1, 0, 1}, exact to 256 terms; f16 multiples of 1/2, 512 terms;
// f32 multiples of 1/8, 2^18 terms; f64 2^47).
[[nodiscard]] std::int64_t exact_limit(dtype t);

// The neighbours of a 16-bit value: next_down(1) is the largest value below 1 (0.99609375 in
// bf16), next_down(+0) the negative subnormal of least magnitude, next_down(-inf) -inf, NaN stays.
template <class T>
[[nodiscard]] T next_down(T v);
template <class T>
[[nodiscard]] T next_up(T v);
// The largest T ≤ v and the smallest T ≥ v (±inf beyond the range): round_down<bfloat16_t>(1.003)
// is 1, round_up<bfloat16_t>(1.003) is 1.0078125.
template <class T>
[[nodiscard]] T round_down(double v);
template <class T>
[[nodiscard]] T round_up(double v);
// To nearest, ties to even, straight from the double (never through float: no double rounding);
// past the largest finite value, ±inf from the overflow threshold on. round_nearest<bfloat16_t>(
// 1.00390625) is 1 (a tie, 1's significand is even), round_nearest<half_t>(65520.0) is +inf.
template <class T>
[[nodiscard]] T round_nearest(double v);

// out[i] = float(in[i]) (exact); narrow: out[i] = T(in[i]), round to nearest even.
template <class T>
void widen(const T* in, std::size_t n, float* out);
template <class T>
void narrow(const float* in, std::size_t n, T* out);

// f_par above for one output element: k_local + k_reduce is the whole chain, k_reduce its share
// added across ranks. f32 accumulation with an f32 reduction is γ_{k_local+k_reduce}(u_f32).
[[nodiscard]] double policy_factor(std::int64_t k_local, std::int64_t k_reduce, dtype storage,
                                   const precision& p);
// The statistical tier's f_par (bound.hpp's γ̃_k(λ) in place of each γ_k, each with its own u).
[[nodiscard]] double policy_factor_statistical(std::int64_t k_local, std::int64_t k_reduce,
                                               dtype storage, const precision& p, double lambda);

// The window check: got (T) against the reference's f32 values b, element by element, with
// δ = factor·mag inflated by 1/(1 − γ_k_mag(f64)) for mag's own rounding. Where b is NaN, got must
// be NaN; where b is ±Inf, the same Inf; elsewhere got must lie in [round(b − δ), round(b + δ)]
// (with bitwise: got must equal round(b) bit for bit). Returns the first failing
// element in row-major order: `expected` is round(b), `bound` δ, reason "window", "bitwise" or
// "nonfinite".
template <class T>
[[nodiscard]] std::optional<mismatch> compare_window(std::size_t rows, std::size_t cols,
                                                     const T* got, std::size_t ld_got,
                                                     const float* b, std::size_t ld_b,
                                                     const double* mag, std::size_t ld_mag,
                                                     double factor, std::int64_t k_mag,
                                                     bool bitwise);

// The share of the window of compare_window used by one finite element: |got − b| over the
// distance from b to the window's edge on got's side (round_up(b + δ) above b, round_down(b − δ)
// below), δ = factor·mag inflated as there. ≤ 1 exactly when got is inside the window; 0 when
// got = b; +infinity when got ≠ b and that edge is b itself (δ = 0 at a representable b). The
// edges are storage values, so a correct kernel's round(b) reads up to 1: bf16, b = 1.001,
// δ = 1e-6: the window is [1, 1] (both ends round to 1), got = 1 reads 1, got = 1.0078125 reads
// 0.0068/0.001 ≈ 6.8 and got = 0.99609375 reads 0.0049/0.001 ≈ 4.9 (one bf16 step out).
template <class T>
[[nodiscard]] double window_share(T got, double b, double mag, double factor, std::int64_t k_mag);

}  // namespace shardcheck::ref
