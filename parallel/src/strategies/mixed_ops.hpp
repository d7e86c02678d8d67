#pragma once
// Mixed precision inside a kernel (reference/mixed.hpp): a 16-bit block is widened to f32 for the
// local products (exact products, f32 sums), and the f32 partial is reduced as the case's policy
// says, then rounded to the storage dtype. For f32 and f64 (wide_t<T> = T) every helper is the
// plain computation, in place, with no copy.
//
// Example: row_parallel in bf16 on 2 ranks, reduce=bf16: each rank sums its K-share of X·Wᵀ in
// f32, rounds that partial to bf16 and all-reduces the bf16 values (each addition widened to f32
// and rounded back); with reduce=f32 it all-reduces the f32 partial and rounds the sum once.
#include <algorithm>
#include <cstddef>
#include <span>
#include <type_traits>
#include <variant>
#include <vector>

#include "shardcheck/parallel/comm.hpp"
#include "shardcheck/parallel/kernel.hpp"
#include "shardcheck/reference/gemm.hpp"
#include "shardcheck/reference/mixed.hpp"

namespace shardcheck::par::mixed {

// The policies of a kernel that reduces: f32 accumulation, partials reduced in f32 or in the
// storage dtype.
inline std::vector<precision> reducing_policies() {
  return {f32_policy, storage_reduce_policies[0], storage_reduce_policies[1]};
}

// Bytes of one element of the partial sums that travel: the reduce dtype of a bf16 / f16 case,
// else the case's dtype.
[[nodiscard]] inline std::size_t reduce_bytes(const run_case& c) {
  return size_of(is_storage16(c.prob.type) ? c.policy.reduce : c.prob.type);
}
[[nodiscard]] inline bool reduce_in_storage(const run_case& c) {
  return is_storage16(c.prob.type) && c.policy.reduce != dtype::f32;
}

// An f32 copy (tracked) of n elements of a 16-bit block.
template <class T>
[[nodiscard]] mem::tracked_vector<float> widen(const T* p, std::size_t n) {
  mem::tracked_vector<float> out(n);
  ref::widen<T>(p, n, out.data());
  return out;
}

// out (rows×n_out, in wide_t<T>) = the layer's forward product; for a 16-bit T through f32 copies
// of x (rows×k_in) and w that live only within the call.
template <class T>
void forward(weight_layout l, std::size_t rows, std::size_t n_out, std::size_t k_in, const T* x,
             const T* w, wide_t<T>* out) {
  if constexpr (!is_16bit_v<T>) {
    ref::linear_forward<T>(l, rows, n_out, k_in, x, w, out);
  } else {
    const auto xa = widen(x, rows * k_in), wa = widen(w, n_out * k_in);
    ref::linear_forward<float>(l, rows, n_out, k_in, xa.data(), wa.data(), out);
  }
}

// out (rows×k_in) = dX's product from dy (rows×n_out) and w.
template <class T>
void backward_dx(weight_layout l, std::size_t rows, std::size_t n_out, std::size_t k_in,
                 const T* dy, const T* w, wide_t<T>* out) {
  if constexpr (!is_16bit_v<T>) {
    ref::linear_backward_dx<T>(l, rows, n_out, k_in, dy, w, out);
  } else {
    const auto da = widen(dy, rows * n_out), wa = widen(w, n_out * k_in);
    ref::linear_backward_dx<float>(l, rows, n_out, k_in, da.data(), wa.data(), out);
  }
}

// out (as W) = dW's product from dy (rows×n_out) and x (rows×k_in), summed over the rows.
template <class T>
void backward_dw(weight_layout l, std::size_t rows, std::size_t n_out, std::size_t k_in,
                 const T* dy, const T* x, wide_t<T>* out) {
  if constexpr (!is_16bit_v<T>) {
    ref::linear_backward_dw<T>(l, rows, n_out, k_in, dy, x, out);
  } else {
    const auto da = widen(dy, rows * n_out), xa = widen(x, rows * k_in);
    ref::linear_backward_dw<float>(l, rows, n_out, k_in, da.data(), xa.data(), out);
  }
}

// A partial in the accumulation dtype: for f32 / f64 the output matrix itself (no copy), for a
// 16-bit T a separate f32 buffer of the same shape.
template <class T>
class partial {
 public:
  explicit partial(matrix<T>& out) : out_(out) {
    if constexpr (is_16bit_v<T>) wide_ = matrix<float>(out.rows, out.cols);
  }
  [[nodiscard]] wide_t<T>* data() {
    if constexpr (is_16bit_v<T>)
      return wide_.data.data();
    else
      return out_.data.data();
  }
  [[nodiscard]] std::span<wide_t<T>> span() {
    if constexpr (is_16bit_v<T>)
      return wide_.span();
    else
      return out_.span();
  }
  // Rounds the partial into the output (nothing to do for f32 / f64).
  void round() {
    if constexpr (is_16bit_v<T>)
      ref::narrow<T>(wide_.data.data(), wide_.data.size(), out_.data.data());
  }
  // All-reduces the partial over `world` into the output as c's policy says: in f32 then one
  // rounding (reduce=f32), or rounded first and summed in T (reduce=storage).
  // \note collective over world.
  void all_reduce(comm& world, const run_case& c) {
    if constexpr (!is_16bit_v<T>) {
      world.all_reduce_sum<T>(out_.span());
    } else if (reduce_in_storage(c)) {
      round();
      world.all_reduce_sum<T>(out_.span());
    } else {
      world.all_reduce_sum<float>(wide_.span());
      round();
    }
  }

 private:
  matrix<T>& out_;
  [[no_unique_address]] std::conditional_t<is_16bit_v<T>, matrix<float>, std::monostate> wide_{};
};

// Reduce-scatters `in` (a partial in wide_t<T>, Σcounts elements) into out (T) as c's policy
// says: rounded to T first and summed in T (reduce=storage, a T copy of `in`), or summed in f32
// into an f32 copy of out, then rounded. \note collective over world.
template <class T>
void reduce_scatter(comm& world, const run_case& c, std::span<const wide_t<T>> in, std::span<T> out,
                    std::span<const std::int64_t> counts) {
  if constexpr (!is_16bit_v<T>) {
    world.reduce_scatter_sum<T>(in, out, counts);
  } else if (reduce_in_storage(c)) {
    mem::tracked_vector<T> rounded(in.size());
    ref::narrow<T>(in.data(), in.size(), rounded.data());
    world.reduce_scatter_sum<T>(std::span<const T>(rounded.data(), rounded.size()), out, counts);
  } else {
    mem::tracked_vector<float> sum(out.size());
    world.reduce_scatter_sum<float>(in, std::span<float>(sum.data(), sum.size()), counts);
    ref::narrow<T>(sum.data(), sum.size(), out.data());
  }
}
// The same with counts parts.size(r)·scale.
template <class T>
void reduce_scatter(comm& world, const run_case& c, std::span<const wide_t<T>> in, std::span<T> out,
                    const partition& parts, std::int64_t scale) {
  reduce_scatter<T>(world, c, in, out, world.scaled_counts(parts, scale));
}

}  // namespace shardcheck::par::mixed
