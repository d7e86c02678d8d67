#include "strategies/layer_pair.hpp"

#include <algorithm>

#include "shardcheck/reference/gemm.hpp"
#include "shardcheck/reference/stack.hpp"

namespace shardcheck::par::layer_pair {

layout weight_placement(std::size_t layer, const run_case& c) {
  const bool out_in = c.prob.layout == weight_layout::out_in;
  // W_1's H is its rows in out_in; W_2's H is its columns in out_in.
  return {placement::S((layer == 0) == out_in ? 0 : 1)};
}

std::int64_t weight_bytes(const run_case& c, int r) {
  const std::int64_t h = c.part("H").size(r);
  return (h * c.prob.K + h * c.prob.N) * static_cast<std::int64_t>(size_of(c.prob.type));
}

std::int64_t hidden_bytes(const run_case& c, int r, std::int64_t rows) {
  return rows * c.part("H").size(r) * static_cast<std::int64_t>(size_of(c.prob.type));
}

namespace {
template <class T>
std::size_t share_of(const run_case& c, std::span<const any_matrix> ws) {
  // W_1's block holds h_r hidden units: its rows (out_in) or columns (in_out).
  const auto& w1 = std::get<matrix<T>>(ws[0]);
  return c.prob.layout == weight_layout::out_in ? w1.rows : w1.cols;
}
}  // namespace

template <class T>
void forward_partial(const run_case& c, std::size_t rows, const T* x,
                     std::span<const any_matrix> ws, T* h, T* partial, bool reversed_w2) {
  const auto k = static_cast<std::size_t>(c.prob.K), n = static_cast<std::size_t>(c.prob.N);
  const std::size_t hr = share_of<T>(c, ws);
  const auto& w1 = std::get<matrix<T>>(ws[0]);
  const auto& w2 = std::get<matrix<T>>(ws[1]);
  ref::linear_forward<T>(c.prob.layout, rows, hr, k, x, w1.data.data(), h);
  ref::activate<T>(c.prob.act, std::span<T>(h, rows * hr));
  if (reversed_w2) {
    for (std::size_t i = 0; i < rows; ++i) std::reverse(h + i * hr, h + (i + 1) * hr);
  }
  ref::linear_forward<T>(c.prob.layout, rows, n, hr, h, w2.data.data(), partial);
}

template <class T>
void backward_partial(const run_case& c, std::size_t rows, const T* x,
                      std::span<const any_matrix> ws, const T* dy, T* h, T* da,
                      std::span<any_matrix> dws, T* dx_partial) {
  const auto k = static_cast<std::size_t>(c.prob.K), n = static_cast<std::size_t>(c.prob.N);
  const std::size_t hr = share_of<T>(c, ws);
  const auto& w1 = std::get<matrix<T>>(ws[0]);
  const auto& w2 = std::get<matrix<T>>(ws[1]);
  auto& dw1 = std::get<matrix<T>>(dws[0]);
  auto& dw2 = std::get<matrix<T>>(dws[1]);
  ref::linear_forward<T>(c.prob.layout, rows, hr, k, x, w1.data.data(), h);  // H_r again
  ref::linear_backward_dx<T>(c.prob.layout, rows, n, hr, dy, w2.data.data(), da);  // dA_1
  ref::activate_backward<T>(c.prob.act, std::span<const T>(h, rows * hr),
                            std::span<T>(da, rows * hr));  // dH_1
  ref::activate<T>(c.prob.act, std::span<T>(h, rows * hr));   // A_1
  dw2 = matrix<T>(w2.rows, w2.cols);
  ref::linear_backward_dw<T>(c.prob.layout, rows, n, hr, dy, h, dw2.data.data());
  dw1 = matrix<T>(w1.rows, w1.cols);
  ref::linear_backward_dw<T>(c.prob.layout, rows, hr, k, da, x, dw1.data.data());
  ref::linear_backward_dx<T>(c.prob.layout, rows, hr, k, da, w1.data.data(), dx_partial);
}

std::vector<chain_lengths> chains(const run_case& c, collective forward, collective backward) {
  const std::int64_t m = c.prob.M, n = c.prob.N, k = c.prob.K, h = c.part("H").max_size();
  return {{k, h + reduction_depth(c.backend, backward, c.p, m * k), m},
          {h + reduction_depth(c.backend, forward, c.p, m * n), n, m}};
}

#define SHARDCHECK_LAYER_PAIR_INSTANTIATE(T)                                                     \
  template void forward_partial<T>(const run_case&, std::size_t, const T*,                      \
                                   std::span<const any_matrix>, T*, T*, bool);                   \
  template void backward_partial<T>(const run_case&, std::size_t, const T*,                     \
                                    std::span<const any_matrix>, const T*, T*, T*,              \
                                    std::span<any_matrix>, T*);
SHARDCHECK_LAYER_PAIR_INSTANTIATE(float)
SHARDCHECK_LAYER_PAIR_INSTANTIATE(double)
#undef SHARDCHECK_LAYER_PAIR_INSTANTIATE

}  // namespace shardcheck::par::layer_pair
