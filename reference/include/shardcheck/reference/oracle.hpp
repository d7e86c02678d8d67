#pragma once
// A high-precision oracle for auditing: the linear-layer products accumulated in __float128
// (113-bit significand), rounded once to double at the end. Slow (naive loops); for audits and
// tests of the bound, not for the property runs.
#include <cstddef>

#include "shardcheck/reference/types.hpp"

namespace shardcheck::ref {

// out (rows×n_out, double) ≈ exact X·Wᵀ (out_in) or X·W (in_out), one rounding from exact.
template <class T>
void oracle_forward(weight_layout layout, std::size_t rows, std::size_t n_out, std::size_t k_in,
                    const T* x, const T* w, double* out);

}  // namespace shardcheck::ref
