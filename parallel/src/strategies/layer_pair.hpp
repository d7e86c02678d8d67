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
//
// In bf16 / f16 (acc=f32, reduce=f32 or the storage dtype): every product is summed in f32 on
// widened copies, and the tensors between the layers are stored in the storage dtype as they are
// formed — H_r (so A_r = f(H_r)) and dA_r, as a 16-bit framework keeps its activations and their
// gradients — while the partials of Y and dX stay f32 until the reduction rounds them as the
// policy says (mixed_ops.hpp); dW_1,r and dW_2,r are rounded once. The reference stores the same
// tensors (reference/stack.hpp stack_storage). The f32 copies are scratch16_* below.
#include <cstdint>
#include <string>
#include <vector>

#include "shardcheck/parallel/kernel.hpp"
#include "shardcheck/reference/gemm.hpp"
#include "shardcheck/reference/stack.hpp"
#include "strategies/mixed_ops.hpp"

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
  // A 16-bit case's f32 copies inside forward_partial and backward_partial (0 otherwise):
  // forward X, W_1,r, H_r, W_2,r; backward X, dY, H_r, dA_r and both weights and their f32 dW.
  [[nodiscard]] static std::int64_t scratch16_forward(const run_case& c, int r, std::int64_t rows);
  [[nodiscard]] static std::int64_t scratch16_backward(const run_case& c, int r, std::int64_t rows);

  // partial (rows×N) = f(X·W_1,rᵀ)·W_2,rᵀ; h (rows×h_r) is scratch, left holding f(H_r).
  template <class T>
  static void forward_partial(const run_case& c, std::size_t rows, const T* x, weights<T> ws, T* h,
                              wide_t<T>* partial);

  // From full X and dY (rows of each): dW_1,r, dW_2,r and the partial dX (rows×K) of this rank;
  // h and da are scratch of rows×h_r.
  template <class T>
  static void backward_partial(const run_case& c, std::size_t rows, const T* x, weights<T> ws,
                               const T* dy, T* h, T* da, gradients<T> dws, wide_t<T>* dx_partial);

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
                                 T* h, wide_t<T>* partial) {
  const auto k = static_cast<std::size_t>(c.prob.K), n = static_cast<std::size_t>(c.prob.N);
  const std::size_t hr = share_of(c, ws);
  if constexpr (is_16bit_v<T>) {
    mem::tracked_vector<float> a(rows * hr);
    {
      const auto xa = mixed::widen(x, rows * k), w1 = mixed::widen(ws[0].data.data(), hr * k);
      ref::linear_forward<float>(c.prob.layout, rows, hr, k, xa.data(), w1.data(), a.data());
    }
    // H_r stored in T; f commutes with the rounding (ReLU keeps the sign, and 0 rounds to 0).
    ref::activate<float>(c.prob.act, std::span<float>(a.data(), a.size()));
    ref::narrow<T>(a.data(), a.size(), h);
    ref::widen<T>(h, a.size(), a.data());
    const auto w2 = mixed::widen(ws[1].data.data(), n * hr);
    ref::linear_forward<float>(c.prob.layout, rows, n, hr, a.data(), w2.data(), partial);
  } else {
    ref::linear_forward<T>(c.prob.layout, rows, hr, k, x, ws[0].data.data(), h);
    ref::activate<T>(c.prob.act, std::span<T>(h, rows * hr));
    ref::linear_forward<T>(c.prob.layout, rows, n, hr, h, ws[1].data.data(), partial);
  }
}

template <class T>
void layer_pair::backward_partial(const run_case& c, std::size_t rows, const T* x, weights<T> ws,
                                  const T* dy, T* h, T* da, gradients<T> dws,
                                  wide_t<T>* dx_partial) {
  const auto k = static_cast<std::size_t>(c.prob.K), n = static_cast<std::size_t>(c.prob.N);
  const std::size_t hr = share_of(c, ws);
  const matrix<T>& w1 = ws[0];
  const matrix<T>& w2 = ws[1];
  if constexpr (is_16bit_v<T>) {
    const auto xa = mixed::widen(x, rows * k), dya = mixed::widen(dy, rows * n);
    const auto w1a = mixed::widen(w1.data.data(), w1.data.size());
    const auto w2a = mixed::widen(w2.data.data(), w2.data.size());
    mem::tracked_vector<float> ha(rows * hr), daa(rows * hr);
    // H_r again and dA_1, each stored in T as it is formed (and read back for the products).
    const auto store = [](mem::tracked_vector<float>& v, T* out) {
      ref::narrow<T>(v.data(), v.size(), out);
      ref::widen<T>(out, v.size(), v.data());
    };
    ref::linear_forward<float>(c.prob.layout, rows, hr, k, xa.data(), w1a.data(), ha.data());
    store(ha, h);
    ref::linear_backward_dx<float>(c.prob.layout, rows, n, hr, dya.data(), w2a.data(), daa.data());
    store(daa, da);
    ref::activate_backward<float>(c.prob.act, std::span<const float>(ha.data(), ha.size()),
                                  std::span<float>(daa.data(), daa.size()));   // dH_1
    ref::activate<float>(c.prob.act, std::span<float>(ha.data(), ha.size()));  // A_1
    mem::tracked_vector<float> g2(w2.data.size()), g1(w1.data.size());
    ref::linear_backward_dw<float>(c.prob.layout, rows, n, hr, dya.data(), ha.data(), g2.data());
    ref::linear_backward_dw<float>(c.prob.layout, rows, hr, k, daa.data(), xa.data(), g1.data());
    dws[1] = matrix<T>(w2.rows, w2.cols);
    ref::narrow<T>(g2.data(), g2.size(), dws[1].data.data());
    dws[0] = matrix<T>(w1.rows, w1.cols);
    ref::narrow<T>(g1.data(), g1.size(), dws[0].data.data());
    ref::linear_backward_dx<float>(c.prob.layout, rows, hr, k, daa.data(), w1a.data(), dx_partial);
  } else {
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
}

}  // namespace shardcheck::par
