#include "shardcheck/reference/gemm.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace shardcheck::ref {

namespace {

blasint to_blas(std::size_t v, const char* what) {
  if (v > static_cast<std::size_t>(std::numeric_limits<blasint>::max()))
    throw error(std::string("gemm: ") + what + " = " + std::to_string(v) +
                " exceeds the BLAS integer range");
  return static_cast<blasint>(v);
}

void check_ld(std::size_t ld, std::size_t cols, const char* what) {
  if (ld < std::max<std::size_t>(1, cols))
    throw error(std::string("gemm: ") + what + " = " + std::to_string(ld) +
                " is smaller than max(1, " + std::to_string(cols) + ")");
}

template <class T>
void scale_c(std::size_t m, std::size_t n, T beta, T* c, std::size_t ldc) {
  if (beta == T(1)) return;
  for (std::size_t i = 0; i < m; ++i) {
    T* row = c + i * ldc;
    if (beta == T(0))
      std::fill(row, row + n, T(0));
    else
      for (std::size_t j = 0; j < n; ++j) row[j] *= beta;
  }
}

void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, blasint m, blasint n, blasint k, float alpha,
               const float* a, blasint lda, const float* b, blasint ldb, float beta, float* c,
               blasint ldc) {
  cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, blasint m, blasint n, blasint k,
               double alpha, const double* a, blasint lda, const double* b, blasint ldb,
               double beta, double* c, blasint ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// |p_i| in double, or p_i² with `squares`.
template <class T>
std::vector<double> absolute(const T* p, std::size_t count, bool squares) {
  std::vector<double> out(count);
  for (std::size_t i = 0; i < count; ++i) {
    const double v = static_cast<double>(p[i]);
    out[i] = squares ? v * v : std::fabs(v);
  }
  return out;
}

}  // namespace

template <class T>
void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, T alpha,
          const T* a, std::size_t lda, const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc) {
  if (m == 0 || n == 0) return;
  check_ld(ldc, n, "ldc");
  if (k == 0) {
    scale_c(m, n, beta, c, ldc);
    return;
  }
  check_ld(lda, trans_a ? m : k, "lda");
  check_ld(ldb, trans_b ? k : n, "ldb");
  // BLAS only promises that C "need not be set" when beta = 0, and some kernels have computed
  // 0·C anyway (OpenBLAS #746, #929 for gemv), turning a NaN in C into a NaN in the result.
  // Clearing C first makes beta = 0 always mean "overwrite".
  if (beta == T(0)) scale_c(m, n, T(0), c, ldc);
  blas_gemm(trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
            to_blas(m, "m"), to_blas(n, "n"), to_blas(k, "k"), alpha, a, to_blas(lda, "lda"), b,
            to_blas(ldb, "ldb"), beta, c, to_blas(ldc, "ldc"));
}

template <class T>
void linear_forward(weight_layout layout, std::size_t rows, std::size_t n_out, std::size_t k_in,
                    const T* x, const T* w, T* y) {
  const bool out_in = layout == weight_layout::out_in;
  gemm<T>(false, out_in, rows, n_out, k_in, T(1), x, k_in, w, out_in ? k_in : n_out, T(0), y,
          n_out);
}

template <class T>
void linear_backward_dx(weight_layout layout, std::size_t rows, std::size_t n_out, std::size_t k_in,
                        const T* dy, const T* w, T* dx) {
  const bool out_in = layout == weight_layout::out_in;
  gemm<T>(false, !out_in, rows, k_in, n_out, T(1), dy, n_out, w, out_in ? k_in : n_out, T(0), dx,
          k_in);
}

template <class T>
void linear_backward_dw(weight_layout layout, std::size_t rows, std::size_t n_out, std::size_t k_in,
                        const T* dy, const T* x, T* dw, bool accumulate) {
  const T beta = accumulate ? T(1) : T(0);
  if (layout == weight_layout::out_in)
    gemm<T>(true, false, n_out, k_in, rows, T(1), dy, n_out, x, k_in, beta, dw, k_in);
  else
    gemm<T>(true, false, k_in, n_out, rows, T(1), x, k_in, dy, n_out, beta, dw, n_out);
}

template <class T>
void magnitude_forward(weight_layout layout, std::size_t rows, std::size_t n_out, std::size_t k_in,
                       const T* x, const T* w, double* out, bool squares) {
  const auto ax = absolute(x, rows * k_in, squares);
  const auto aw = absolute(w, n_out * k_in, squares);
  linear_forward<double>(layout, rows, n_out, k_in, ax.data(), aw.data(), out);
}

template <class T>
void magnitude_backward_dx(weight_layout layout, std::size_t rows, std::size_t n_out,
                           std::size_t k_in, const T* dy, const T* w, double* out, bool squares) {
  const auto ady = absolute(dy, rows * n_out, squares);
  const auto aw = absolute(w, n_out * k_in, squares);
  linear_backward_dx<double>(layout, rows, n_out, k_in, ady.data(), aw.data(), out);
}

template <class T>
void magnitude_backward_dw(weight_layout layout, std::size_t rows, std::size_t n_out,
                           std::size_t k_in, const T* dy, const T* x, double* out, bool squares) {
  const auto ady = absolute(dy, rows * n_out, squares);
  const auto ax = absolute(x, rows * k_in, squares);
  linear_backward_dw<double>(layout, rows, n_out, k_in, ady.data(), ax.data(), out, false);
}

#define SHARDCHECK_INSTANTIATE(T)                                                                 \
  template void gemm<T>(bool, bool, std::size_t, std::size_t, std::size_t, T, const T*,           \
                        std::size_t, const T*, std::size_t, T, T*, std::size_t);                  \
  template void linear_forward<T>(weight_layout, std::size_t, std::size_t, std::size_t, const T*, \
                                  const T*, T*);                                                  \
  template void linear_backward_dx<T>(weight_layout, std::size_t, std::size_t, std::size_t,       \
                                      const T*, const T*, T*);                                    \
  template void linear_backward_dw<T>(weight_layout, std::size_t, std::size_t, std::size_t,       \
                                      const T*, const T*, T*, bool);                              \
  template void magnitude_forward<T>(weight_layout, std::size_t, std::size_t, std::size_t,        \
                                     const T*, const T*, double*, bool);                          \
  template void magnitude_backward_dx<T>(weight_layout, std::size_t, std::size_t, std::size_t,    \
                                         const T*, const T*, double*, bool);                      \
  template void magnitude_backward_dw<T>(weight_layout, std::size_t, std::size_t, std::size_t,    \
                                         const T*, const T*, double*, bool);

SHARDCHECK_INSTANTIATE(float)
SHARDCHECK_INSTANTIATE(double)
#undef SHARDCHECK_INSTANTIATE

}  // namespace shardcheck::ref
