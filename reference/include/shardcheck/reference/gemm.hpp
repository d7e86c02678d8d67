#pragma once
// The single-device reference: OpenBLAS GEMM for the linear layer, forward and backward, and the
// magnitude products that the error bounds are built from. Row-major, leading dimension = columns
// unless given. Never touches MPI.
#include <cstddef>
#include <span>

#include "shardcheck/reference/types.hpp"

namespace shardcheck::ref {

// C (m×n, ldc) = alpha·op(A)·op(B) + beta·C on OpenBLAS; op(A) is m×k, op(B) is k×n; a transposed
// operand is stored k×m (k×n as its transpose). Any of m, n, k may be 0 (k = 0 scales C by beta).
template <class T>
void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, T alpha,
          const T* a, std::size_t lda, const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc);

// Linear layer on dense row-major blocks. `rows` is the number of rows of X (and Y, dY, dX) in
// this call; the weight is the full n_out × k_in (out_in) or k_in × n_out (in_out) block given.
// Y (rows×n_out) = X (rows×k_in) · Wᵀ or · W.
template <class T>
void linear_forward(weight_layout layout, std::size_t rows, std::size_t n_out, std::size_t k_in,
                    const T* x, const T* w, T* y);
// dX (rows×k_in) = dY (rows×n_out) · W   (out_in)  or dY · Wᵀ (in_out).
template <class T>
void linear_backward_dx(weight_layout layout, std::size_t rows, std::size_t n_out, std::size_t k_in,
                        const T* dy, const T* w, T* dx);
// dW = dYᵀ·X (n_out×k_in, out_in) or Xᵀ·dY (k_in×n_out, in_out), summed over `rows` rows.
// accumulate=true adds into dw instead of overwriting it.
template <class T>
void linear_backward_dw(weight_layout layout, std::size_t rows, std::size_t n_out, std::size_t k_in,
                        const T* dy, const T* x, T* dw, bool accumulate = false);

// Magnitude versions of the three products, in double whatever T is: the same products on
// |X|, |W|, |dY|. They are what the per-element error bound multiplies. With `squares`, the same
// products on X∘X, W∘W, dY∘dY (each square formed in double): Σ_k x_ik²·w_jk², what the
// statistical tier's data-aware bound is made of (bound.hpp).
template <class T>
void magnitude_forward(weight_layout layout, std::size_t rows, std::size_t n_out, std::size_t k_in,
                       const T* x, const T* w, double* out, bool squares = false);
template <class T>
void magnitude_backward_dx(weight_layout layout, std::size_t rows, std::size_t n_out,
                           std::size_t k_in, const T* dy, const T* w, double* out,
                           bool squares = false);
template <class T>
void magnitude_backward_dw(weight_layout layout, std::size_t rows, std::size_t n_out,
                           std::size_t k_in, const T* dy, const T* x, double* out,
                           bool squares = false);

}  // namespace shardcheck::ref
