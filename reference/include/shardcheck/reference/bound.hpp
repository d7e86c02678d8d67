#pragma once
// Error bounds (Higham, Accuracy and Stability of Numerical Algorithms, §3.1): a dot product of
// length k computed in any order, with or without FMA, satisfies |ŝ − s| ≤ γ_k · Σ|x_i||y_i|,
// γ_k = k·u / (1 − k·u), u = 2⁻²⁴ (float) or 2⁻⁵³ (double). Two computations of the same product
// with chain lengths k1, k2 differ by at most (γ_k1 + γ_k2)·(|X||W|ᵀ)_ij.
//
// A stack of L layers (stack.hpp), H_l = A_{l−1}·W_lᵀ, A_l = f(H_l), f 1-Lipschitz with
// |f(x)| ≤ |x| (identity, ReLU). One computation with chains k_l: by induction on l,
//   |Â_l − A_l| ≤ (Π_{j≤l}(1+γ_kj) − 1)·Mag_l  and  |Â_l| ≤ Π_{j≤l}(1+γ_kj)·Mag_l,
//   Mag_l = |X|·|W_1|ᵀ·…·|W_l|ᵀ,
// since Ĥ_{l+1} − H_{l+1} = (Â_l − A_l)·W_{l+1}ᵀ + (rounding ≤ γ_k(l+1)·|Â_l|·|W_{l+1}|ᵀ), and
//   (Π_l − 1) + γ·Π_l = Π_{l+1} − 1  with Π_l = Π_{j≤l}(1+γ_kj).
// So per element |Ŷ_par − Ŷ_ref| ≤ (Π_l(1+γ_kpar,l) − 1 + Π_l(1+γ_kref,l) − 1)·Mag_L, and L = 1 is
// the single-layer bound above. stack_expect computes it as a running bound in double: for every
// computed quantity Z a matrix Δ_Z ≥ |Z_par − Z_ref| and a magnitude Mag_Z with |Z_c| ≤ s_c·Mag_Z,
// through a product with a shared (exact) weight B:
//   Δ_{ZB} = Δ_Z·|B| + (γ_par·s_par + γ_ref·s_ref)·Mag_Z·|B|,   s_c ← s_c·(1+γ_c),
// which is the closed form above when nothing is masked; through a product of two computed
// quantities (dW_l = dH_lᵀ·A_{l−1}):
//   Δ = Δ_Gᵀ·s_par^A·Mag_A + s_ref^G·Mag_Gᵀ·Δ_A + (γ_par·s^G_par·s^A_par +
//   γ_ref·s^G_ref·s^A_ref)·Mag_Gᵀ·Mag_A
// from |g_p a_p − g_r a_r| ≤ |g_p − g_r||a_p| + |g_r||a_p − a_r|.
// ReLU backward: dH = dA ⊙ f'(H). Where |H_ref| > Δ_H both computations take the same branch
// (|H_par − H_ref| ≤ Δ_H); where |H_ref| ≤ Δ_H (the uncertain set U) one may pass dA and the other
// 0, so Δ_dH = max(Δ_dA, max_c s_c·Mag_dA) there — this adds (U⊙|G|)·|W_1| to dX and
// (U⊙|G|)ᵀ·|X| to dW_1 for G = dY·W_2 bounded by magnitude. Where H_ref < −Δ_H both give 0 and Δ,
// Mag are 0. Every double product and update rounds: the bounds are divided by 1 − γ_kmag(double),
// kmag = Σ_l (d_{l−1} + d_l + rows) + 8L, which covers those roundings of nonnegative terms.
// Exact mode stays bitwise: exact_stack_problem refuses shapes whose sums could round.
#include <cstdint>

#include "shardcheck/reference/types.hpp"

namespace shardcheck::ref {

// u of dtype t: 2⁻²⁴ (f32), 2⁻⁵³ (f64), 2⁻⁸ (bf16), 2⁻¹¹ (f16).
[[nodiscard]] double unit_roundoff(dtype t);
// γ_k; +infinity once k·u ≥ 1 (no bound can be given).
[[nodiscard]] double gamma(std::int64_t k, dtype t);
// The tolerance for one element: (γ_k_par + γ_k_ref) · mag, where mag is the magnitude product
// computed in double; it is inflated by 1/(1 − γ_k_mag(double)) to cover the rounding of mag
// itself.
// With λ > 0 the statistical tier's tolerance instead: (γ̃_k_par(λ) + γ̃_k_ref(λ)) · mag, the same
// inflation (the rounding of mag is bounded rigorously in both tiers).
[[nodiscard]] double element_bound(double mag, std::int64_t k_par, std::int64_t k_ref, dtype t,
                                   std::int64_t k_mag, double lambda = 0);

// --- the statistical tier (Higham & Mary, "A new approach to probabilistic rounding error
// analysis", SIAM J. Sci. Comput. 41(5), 2019) --------------------------------------------------
// Assumption: the rounding errors δ_i of one computation are independent random variables of mean
// zero with |δ_i| ≤ u. Then (their Theorem 2.4) Π_{i≤k}(1+δ_i) = 1 + θ_k with
//   |θ_k| ≤ γ̃_k(λ) = exp(λ·√k·u + k·u²/(1 − u)) − 1   (≈ λ·√k·u)
// except with probability at most 2·exp(−λ²(1 − u)²/2); a dot product of length k (Theorem 3.1)
// holds |ŝ − s| ≤ γ̃_k(λ)·Σ|x_i||y_i| except with probability at most 2k·exp(−λ²(1 − u)²/2).
// gamma_tilde(k, u, λ): γ̃_k(λ); +infinity where it overflows. gamma_tilde(16384, 2⁻²⁴, 9.4)
// is 7.2e-5, against γ_16384 = 9.8e-4.
[[nodiscard]] double gamma_tilde(std::int64_t k, double u, double lambda);
// The λ that makes `events` such bounds hold together except with probability at most p_fail
// (a union bound): events = Σ over the checked elements and computations of the chain length k,
// λ = √(2·ln(2·events/p_fail)) / (1 − u). lambda_for(1e10, 1e-9, 2⁻²⁴) = 9.42.
[[nodiscard]] double lambda_for(double events, double p_fail, double u);
// The probability bound of the statistical tier at λ for `events` roundings:
// min(1, 2·events·exp(−λ²(1 − u)²/2)); false_alarm(e, lambda_for(e, p, u), u) ≈ p.
[[nodiscard]] double false_alarm(double events, double lambda, double u);
// --- the mean of m squared projections (the projection tier, properties/verdict.hpp) ---------
// Z = Σ_j v_j·e_j over independent Rademacher signs v_j is sub-Gaussian: E exp(sZ) ≤
// exp(s²σ²/2), σ² = Σ_j e_j². With g a standard normal, E exp(θZ²) = E_g E_Z exp(√(2θ)·g·Z) ≤
// E_g exp(θ·g²·σ²) = (1 − 2θσ²)^(−1/2), so the sum of m independent such Z_r² is dominated by
// σ² times a χ² of m degrees of freedom, and Chernoff's bound at θ = (1 − 1/τ)/(2σ²) gives
//   P(Σ_r Z_r² ≥ m·τ·σ²) ≤ exp(−(m/2)·(τ − 1 − ln τ))   for τ > 1.
// rms_lambda_for(events, p, m): the λ = √τ at which `events` such rows hold together except with
// probability at most p (a union bound): the root mean square of a row's m projected errors is
// then at most λ·σ. rms_lambda_for(1e5, 5e-10, 8) = 3.42, against Hoeffding's √(2·ln(2e5/5e-10))
// = 8.2 for one vector: m vectors judge the mean of their squares, which concentrates, where one
// vector's single draw may fall near 0 (an error of rank one, the same draw on every row).
// Throws shardcheck::error unless 0 < p_fail < 1 and m ≥ 1.
[[nodiscard]] double rms_lambda_for(double events, double p_fail, int m);
// min(1, events·exp(−(m/2)·(λ² − 1 − ln λ²))) for λ > 1; rms_false_alarm(e, rms_lambda_for(e, p,
// m), m) ≈ p.
[[nodiscard]] double rms_false_alarm(double events, double lambda, int m);
// The tier's γ: the rigorous γ_k when λ = 0, else γ̃_k(λ) with t's unit roundoff.
[[nodiscard]] double tier_gamma(std::int64_t k, dtype t, double lambda);
// --- the data-aware bound (the statistical tier on sign-symmetric data) ------------------------
// Higham & Mary's bound grows as √k·u·Σ|t_j| (t_j = x_j·w_j the k products). On data whose signs
// are fair coins (data.hpp signs_symmetric) the partial sums cancel, and the error of a
// computation in any fixed summation tree is, exactly,
//   ŝ − s = Σ_nodes δ_node·σ_node + Σ_j δ'_j·t_j,
// δ_node the rounding of the node's addition, σ_node = ŝ_left + ŝ_right the exact sum of its
// computed children, δ'_j the rounding of product j (0 with FMA): each node's rounding reaches the
// root unamplified. In evaluation order this is a martingale under the tier's model (each δ of
// mean zero given the past, |δ| ≤ u), and |σ_node| ≤ c_node = |S_node| + γ_k·mag_node
// (S_node = Σ_{j∈node} t_j exact), so by Azuma–Hoeffding
//   |ŝ − s| ≤ λ_a·u·√(Σ_nodes c_node² + Σ_j t_j²)
// except with probability 2·exp(−λ_a²/2). The data: given the magnitudes, the signs of the terms
// are independent fair coins (a term's sign is the product of its factors', fair if either is),
// and the tree is fixed before the values, so by Hoeffding |S_node| ≤ λ_d·√(Σ_{j∈node} t_j²)
// except with probability 2·exp(−λ_d²/2) per node (k − 1 nodes per tree). A leaf lies in at most
// k nodes (its depth, at most the chain) and the nodes of one depth are disjoint, so with
// q = Σ_j t_j² (one more product, (X∘X)·(W∘W)ᵀ) and Minkowski's inequality,
//   √(Σ_nodes c_node²) ≤ √k·(λ_d·√q + γ_k·mag),
//   |ŝ − s| ≤ λ_a·u·√(k·(λ_d·√q + γ_k·mag)² + q).
// Against γ̃_k(λ)·mag ≈ λ·√k·u·mag it is sharper by about mag/(λ_d·√q) — ≈ √k·E|t|/(λ_d·√E t²),
// 6.8× at k = 16384 on uniform data — and looser for short sums; the tier takes the smaller of
// the two for each computation (each family at half the false-alarm probability). A term whose
// two factors both have a fixed sign (uniform's −1·−1) is not covered: its element keeps the
// magnitude bound (q = +∞). data_aware_bound(q, mag, k, t, λ_a, λ_d): the bound above, +∞ where
// γ_k is; q and mag are upper bounds on the exact sums (their own rounding is the caller's).
[[nodiscard]] double data_aware_bound(double q, double mag, std::int64_t k, dtype t,
                                      double lambda_a, double lambda_d);

// The false-alarm probability the statistical tier is built for, per case: a correct kernel fails
// a case as `statistical` with probability at most this (under the assumption above).
inline constexpr double statistical_p_fail = 1e-9;

}  // namespace shardcheck::ref
