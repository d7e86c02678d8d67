#pragma once
// What the two-layer tensor-parallel kernels (column_row_pair, sequence_parallel_pair) share:
// Megatron's MLP split, W_1 on its outputs and W_2 on its inputs by the same partition part.H, so
// each rank holds hidden units [offset_r, offset_r + h_r) of both and computes, without talking to
// anyone, its partial of Y = f(X·W_1ᵀ)·W_2ᵀ (a full rows×N matrix summed over ranks) and, from dY,
// its shards of dW_1, dW_2 and its partial of dX (summed over ranks).
//   W_1: out_in H×K, S(0) | in_out K×H, S(1)      W_2: out_in N×H, S(1) | in_out H×N, S(0)
// Kernels are stateless, so backward recomputes the pre-activation H_r (rows×h_r) it needs.
//
// Example: out_in, H = 7, part.H = 3,4 on p = 2: rank 1 holds rows 3–6 of W_1 (4×K) and columns
// 3–6 of W_2 (N×4); its partial of Y is f(X·W_1,1ᵀ)·W_2,1ᵀ, rows×N.
#include <cstdint>
#include <string>
#include <vector>

#include "shardcheck/parallel/kernel.hpp"
#include "shardcheck/reference/gemm.hpp"
#include "shardcheck/reference/stack.hpp"

namespace shardcheck::par {

// The base both pairs derive from: exactly two layers, no parameters, W_1 / dW_1 and W_2 / dW_2
// placed as above, every other tensor (X, Y, dY, dX) placed `outside`.
class layer_pair : public kernel {
 public:
  [[nodiscard]] const kernel_info& info() const override { return info_; }
  [[nodiscard]] layout placement(tensor_slot t, const run_case& c) const override;

 protected:
  layer_pair(std::string name, std::string summary, par::placement outside);

  // Bytes of this rank's blocks of W_1 and W_2 (= dW_1 and dW_2), and of H_r (rows×h_r).
  [[nodiscard]] static std::int64_t weight_bytes(const run_case& c, int r);
  [[nodiscard]] static std::int64_t hidden_bytes(const run_case& c, int r, std::int64_t rows);

  // partial (rows×N) = f(X·W_1,rᵀ)·W_2,rᵀ; h (rows×h_r) is scratch, left holding f(H_r).
  template <class T>
  static void forward_partial(const run_case& c, std::size_t rows, const T* x, weights<T> ws, T* h,
                              T* partial);

  // From full X and dY (rows of each): dW_1,r, dW_2,r and the partial dX (rows×K) of this rank;
  // h and da are scratch of rows×h_r.
  template <class T>
  static void backward_partial(const run_case& c, std::size_t rows, const T* x, weights<T> ws,
                               const T* dy, T* h, T* da, gradients<T> dws, T* dx_partial);

  // Chains per layer: H_1 over K; Y over the largest h_r plus the reduction `forward`; dX over
  // the largest h_r plus the reduction `backward`; dA_1 over N; dW_l over the rows.
  [[nodiscard]] static std::vector<chain_lengths> chains(const run_case& c, collective forward,
                                                         collective backward);

 private:
  // h_r, the hidden units of W_1's block: its rows (out_in) or columns (in_out).
  template <class T>
  static std::size_t share_of(const run_case& c, weights<T> ws) {
    return c.prob.layout == weight_layout::out_in ? ws[0].rows : ws[0].cols;
  }

  kernel_info info_;
  par::placement outside_;
};

template <class T>
void layer_pair::forward_partial(const run_case& c, std::size_t rows, const T* x, weights<T> ws,
                                 T* h, T* partial) {
  const auto k = static_cast<std::size_t>(c.prob.K), n = static_cast<std::size_t>(c.prob.N);
  const std::size_t hr = share_of(c, ws);
  ref::linear_forward<T>(c.prob.layout, rows, hr, k, x, ws[0].data.data(), h);
  ref::activate<T>(c.prob.act, std::span<T>(h, rows * hr));
  ref::linear_forward<T>(c.prob.layout, rows, n, hr, h, ws[1].data.data(), partial);
}

template <class T>
void layer_pair::backward_partial(const run_case& c, std::size_t rows, const T* x, weights<T> ws,
                                  const T* dy, T* h, T* da, gradients<T> dws, T* dx_partial) {
  const auto k = static_cast<std::size_t>(c.prob.K), n = static_cast<std::size_t>(c.prob.N);
  const std::size_t hr = share_of(c, ws);
  const matrix<T>& w1 = ws[0];
  const matrix<T>& w2 = ws[1];
  ref::linear_forward<T>(c.prob.layout, rows, hr, k, x, w1.data.data(), h);        // H_r again
  ref::linear_backward_dx<T>(c.prob.layout, rows, n, hr, dy, w2.data.data(), da);  // dA_1
  ref::activate_backward<T>(c.prob.act, std::span<const T>(h, rows * hr),
                            std::span<T>(da, rows * hr));    // dH_1
  ref::activate<T>(c.prob.act, std::span<T>(h, rows * hr));  // A_1
  dws[1] = matrix<T>(w2.rows, w2.cols);
  ref::linear_backward_dw<T>(c.prob.layout, rows, n, hr, dy, h, dws[1].data.data());
  dws[0] = matrix<T>(w1.rows, w1.cols);
  ref::linear_backward_dw<T>(c.prob.layout, rows, hr, k, da, x, dws[0].data.data());
  ref::linear_backward_dx<T>(c.prob.layout, rows, hr, k, da, w1.data.data(), dx_partial);
}

}  // namespace shardcheck::par
