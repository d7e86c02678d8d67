#include "shardcheck/reference/data.hpp"

#include <array>
#include <cmath>
#include <limits>
#include <string>

namespace shardcheck::ref {

namespace {

constexpr std::uint64_t mix(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

constexpr std::uint64_t row_prefix(std::uint64_t seed, std::uint32_t tensor, std::uint64_t row) {
  return mix(mix(mix(seed) ^ tensor) ^ row);
}

constexpr std::uint64_t finish(std::uint64_t prefix, std::uint64_t col) {
  return mix(prefix ^ col);
}

// Uniform integer in [0, n) from the top 32 bits of h.
constexpr std::uint64_t below(std::uint64_t h, std::uint64_t n) { return ((h >> 32) * n) >> 32; }

template <class T>
constexpr int digits = std::numeric_limits<T>::digits;

// 2^e, exactly (|e| ≤ 64): a multiplication by it is what std::ldexp does, without its cost
// (the data generator's largest one: a fifth of a large case's time went to scalbnf).
template <class T>
constexpr T pow2(int e) {
  T v = 1;
  for (; e > 0; --e) v *= 2;
  for (; e < 0; ++e) v /= 2;
  return v;
}

// j · 2^-p with p = digits<T>: [0, 1) with every significand bit random.
template <class T>
T unit(std::uint64_t h) {
  return static_cast<T>(h >> (64 - digits<T>)) * pow2<T>(-digits<T>);
}

// 1 + f · 2^-(p-1): [1, 2) with every fraction bit random.
template <class T>
T one_two(std::uint64_t h) {
  return T(1) + static_cast<T>(h >> (64 - (digits<T> - 1))) * pow2<T>(1 - digits<T>);
}

// wide mode's scales 2^−16 … 2^16.
template <class T>
constexpr auto wide_scale = [] {
  std::array<T, 33> a{};
  for (int i = 0; i < 33; ++i) a[static_cast<std::size_t>(i)] = pow2<T>(i - 16);
  return a;
}();

template <class T>
T sign(std::uint64_t h, T v) {
  return (h & 1) ? -v : v;
}

template <class T>
T uniform(std::uint64_t h) {
  const auto j = static_cast<std::int64_t>(h >> (64 - digits<T>));
  return static_cast<T>(j - (std::int64_t{1} << (digits<T> - 1))) * pow2<T>(1 - digits<T>);
}

// exact mode at grid 2^−g: j·2^−g, j uniform in [−2^g, 2^g]; g = 3 gives (below(h, 17) − 8)/8.
template <class T>
T from_hash(value_mode mode, std::uint64_t h, int grid) {
  const std::uint64_t h2 = mix(h ^ 0x5851f42d4c957f2dULL);
  switch (mode) {
    case value_mode::exact: {
      const int scale = 1 << grid;
      return static_cast<T>(static_cast<int>(below(h, 2 * static_cast<std::uint64_t>(scale) + 1)) -
                            scale) /
             static_cast<T>(scale);
    }
    case value_mode::uniform: return uniform<T>(h);
    case value_mode::wide: return sign(h2, one_two<T>(h) * wide_scale<T>[below(h2, 33)]);
    case value_mode::cancel: return sign(h2, (h2 & 2) ? one_two<T>(h) * pow2<T>(12) : unit<T>(h));
    case value_mode::nonfinite:
      if ((h2 & 31) == 0) {
        switch (below(h2, 3)) {
          case 0: return std::numeric_limits<T>::quiet_NaN();
          case 1: return std::numeric_limits<T>::infinity();
          default: return -std::numeric_limits<T>::infinity();
        }
      }
      return uniform<T>(h);
  }
  return T(0);
}

void check_grid(int grid) {
  if (grid < 0 || grid > 20)
    throw error("exact mode's grid 2^-" + std::to_string(grid) + " is outside 2^0 … 2^-20");
}

}  // namespace

std::uint64_t counter_hash(std::uint64_t seed, std::uint32_t tensor, std::uint64_t row,
                           std::uint64_t col) {
  return finish(row_prefix(seed, tensor, row), col);
}

template <class T>
T element(value_mode mode, std::uint64_t seed, std::uint32_t tensor, std::uint64_t row,
          std::uint64_t col, int grid) {
  check_grid(grid);
  return from_hash<T>(mode, counter_hash(seed, tensor, row, col), grid);
}

template <class T>
void fill_block(value_mode mode, std::uint64_t seed, std::uint32_t tensor, std::uint64_t row0,
                std::uint64_t rows, std::uint64_t col0, std::uint64_t cols, T* out, std::size_t ld,
                int grid) {
  check_grid(grid);
  if (ld == 0) ld = cols;
  if (ld < cols)
    throw error("fill_block: ld = " + std::to_string(ld) +
                " is smaller than cols = " + std::to_string(cols));
  for (std::uint64_t r = 0; r < rows; ++r) {
    const std::uint64_t prefix = row_prefix(seed, tensor, row0 + r);
    T* row = out + r * ld;
    for (std::uint64_t c = 0; c < cols; ++c)
      row[c] = from_hash<T>(mode, finish(prefix, col0 + c), grid);
  }
}

template float element<float>(value_mode, std::uint64_t, std::uint32_t, std::uint64_t,
                              std::uint64_t, int);
template double element<double>(value_mode, std::uint64_t, std::uint32_t, std::uint64_t,
                                std::uint64_t, int);
template void fill_block<float>(value_mode, std::uint64_t, std::uint32_t, std::uint64_t,
                                std::uint64_t, std::uint64_t, std::uint64_t, float*, std::size_t,
                                int);
template void fill_block<double>(value_mode, std::uint64_t, std::uint32_t, std::uint64_t,
                                 std::uint64_t, std::uint64_t, std::uint64_t, double*, std::size_t,
                                 int);

}  // namespace shardcheck::ref
