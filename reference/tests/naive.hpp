#pragma once
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "shardcheck/reference/data.hpp"
#include "shardcheck/reference/types.hpp"

namespace shardcheck::ref::test {

struct shape {
  std::size_t m, n, k;
};

inline const std::vector<shape>& shapes() {
  static const std::vector<shape> all = {{0, 5, 3},    {4, 0, 3},  {4, 5, 0},    {0, 0, 0},
                                         {1, 1, 1},    {7, 3, 1},  {1, 9, 4},    {13, 11, 17},
                                         {31, 29, 37}, {5, 97, 3}, {64, 48, 96}, {9, 7, 1031}};
  return all;
}

inline constexpr weight_layout layouts[] = {weight_layout::out_in, weight_layout::in_out};

template <class T>
struct layer_data {
  std::vector<T> x, w, dy;
};

template <class T>
std::vector<T> block(value_mode mode, std::uint64_t seed, tensor_id id, std::size_t rows,
                     std::size_t cols) {
  std::vector<T> v(rows * cols);
  fill_block<T>(mode, seed, static_cast<std::uint32_t>(id), 0, rows, 0, cols, v.data());
  return v;
}

template <class T>
layer_data<T> make_data(value_mode mode, std::uint64_t seed, weight_layout l, shape s) {
  const bool out_in = l == weight_layout::out_in;
  return {block<T>(mode, seed, tensor_id::x, s.m, s.k),
          block<T>(mode, seed, tensor_id::w, out_in ? s.n : s.k, out_in ? s.k : s.n),
          block<T>(mode, seed, tensor_id::dy, s.m, s.n)};
}

template <class T>
T w_at(weight_layout l, const std::vector<T>& w, shape s, std::size_t j, std::size_t k) {
  return l == weight_layout::out_in ? w[j * s.k + k] : w[k * s.n + j];
}

template <class T>
std::vector<T> naive_forward(weight_layout l, shape s, const layer_data<T>& d) {
  std::vector<T> y(s.m * s.n);
  for (std::size_t i = 0; i < s.m; ++i)
    for (std::size_t j = 0; j < s.n; ++j) {
      T acc = 0;
      for (std::size_t k = 0; k < s.k; ++k) acc += d.x[i * s.k + k] * w_at(l, d.w, s, j, k);
      y[i * s.n + j] = acc;
    }
  return y;
}

template <class T>
std::vector<T> naive_dx(weight_layout l, shape s, const layer_data<T>& d) {
  std::vector<T> dx(s.m * s.k);
  for (std::size_t i = 0; i < s.m; ++i)
    for (std::size_t k = 0; k < s.k; ++k) {
      T acc = 0;
      for (std::size_t j = 0; j < s.n; ++j) acc += d.dy[i * s.n + j] * w_at(l, d.w, s, j, k);
      dx[i * s.k + k] = acc;
    }
  return dx;
}

template <class T>
std::vector<T> naive_dw(weight_layout l, shape s, const layer_data<T>& d) {
  std::vector<T> dw(s.n * s.k);
  for (std::size_t j = 0; j < s.n; ++j)
    for (std::size_t k = 0; k < s.k; ++k) {
      T acc = 0;
      for (std::size_t i = 0; i < s.m; ++i) acc += d.dy[i * s.n + j] * d.x[i * s.k + k];
      dw[l == weight_layout::out_in ? j * s.k + k : k * s.n + j] = acc;
    }
  return dw;
}

template <class T>
layer_data<double> absolute(const layer_data<T>& d) {
  auto abs_of = [](const std::vector<T>& v) {
    std::vector<double> out(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) out[i] = std::fabs(static_cast<double>(v[i]));
    return out;
  };
  return {abs_of(d.x), abs_of(d.w), abs_of(d.dy)};
}

template <class T>
auto bits(T v) {
  if constexpr (sizeof(T) == 4)
    return std::bit_cast<std::uint32_t>(v);
  else
    return std::bit_cast<std::uint64_t>(v);
}

template <class T>
std::optional<std::size_t> first_bit_difference(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (bits(a[i]) != bits(b[i])) return i;
  return std::nullopt;
}

}  // namespace shardcheck::ref::test
