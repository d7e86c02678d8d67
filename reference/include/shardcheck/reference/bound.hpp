#pragma once
// Error bounds (Higham, Accuracy and Stability of Numerical Algorithms, §3.1): a dot product of
// length k computed in any order, with or without FMA, satisfies |ŝ − s| ≤ γ_k · Σ|x_i||y_i|,
// γ_k = k·u / (1 − k·u), u = 2⁻²⁴ (float) or 2⁻⁵³ (double). Two computations of the same product
// with chain lengths k1, k2 differ by at most (γ_k1 + γ_k2)·(|X||W|ᵀ)_ij.
#include <cstdint>

#include "shardcheck/reference/types.hpp"

namespace shardcheck::ref {

[[nodiscard]] double unit_roundoff(dtype t);
// γ_k; +infinity once k·u ≥ 1 (no bound can be given).
[[nodiscard]] double gamma(std::int64_t k, dtype t);
// The tolerance for one element: (γ_k_par + γ_k_ref) · mag, where mag is the magnitude product
// computed in double; it is inflated by 1/(1 − γ_k_mag(double)) to cover the rounding of mag itself.
[[nodiscard]] double element_bound(double mag, std::int64_t k_par, std::int64_t k_ref, dtype t,
                                   std::int64_t k_mag);

}  // namespace shardcheck::ref
