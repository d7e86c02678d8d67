#include "shardcheck/reference/data.hpp"

#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "shardcheck/reference/mixed.hpp"

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

// zero_inf mode's rows and columns that hold non-finite values: about one in eight of each, drawn
// per (seed, tensor, axis, index).
constexpr std::uint64_t row_salt = 0x2545f4914f6cdd1dULL, col_salt = 0x9fb21c651e98df25ULL;
constexpr bool hot(std::uint64_t seed, std::uint32_t tensor, std::uint64_t salt,
                   std::uint64_t index) {
  return (mix(mix(mix(seed ^ salt) ^ tensor) ^ index) & 7) == 0;
}

// Uniform integer in [0, n) from the top 32 bits of h.
constexpr std::uint64_t below(std::uint64_t h, std::uint64_t n) { return ((h >> 32) * n) >> 32; }

// C computes the value with D significand bits: D = digits of T, C = T, except for the 16-bit
// storage dtypes, computed in float with their own D (8 for bf16, 11 for f16) and then stored
// exactly.
template <class T>
constexpr int digits = std::numeric_limits<T>::digits;

// 2^e, exactly (|e| ≤ 64): a multiplication by it is what std::ldexp does, without its cost
// (the data generator's largest one: a fifth of a large case's time went to scalbnf).
template <class C>
constexpr C pow2(int e) {
  C v = 1;
  for (; e > 0; --e) v *= 2;
  for (; e < 0; ++e) v /= 2;
  return v;
}

// j · 2^-D: [0, 1) with every significand bit random.
template <class C, int D>
C unit(std::uint64_t h) {
  return static_cast<C>(h >> (64 - D)) * pow2<C>(-D);
}

// 1 + f · 2^-(D-1): [1, 2) with every fraction bit random.
template <class C, int D>
C one_two(std::uint64_t h) {
  return C(1) + static_cast<C>(h >> (64 - (D - 1))) * pow2<C>(1 - D);
}

// wide mode's scales 2^−16 … 2^16.
template <class C>
constexpr auto wide_scale = [] {
  std::array<C, 33> a{};
  for (int i = 0; i < 33; ++i) a[static_cast<std::size_t>(i)] = pow2<C>(i - 16);
  return a;
}();

template <class C>
C sign(std::uint64_t h, C v) {
  return (h & 1) ? -v : v;
}

template <class C, int D>
C uniform(std::uint64_t h) {
  const auto j = static_cast<std::int64_t>(h >> (64 - D));
  return static_cast<C>(j - (std::int64_t{1} << (D - 1))) * pow2<C>(1 - D);
}

// Exact mode's values: multiples of 1/8 in [-1, 1] in f32 and f64; in the 16-bit dtypes, coarser
// so that sums of up to exact_limit(t) products stay exact in the storage dtype itself (partial
// sums sent in it included): bf16 {-1, 0, 1} (integer sums, exact up to 2^8), f16 multiples of
// 1/2 (sums multiples of 1/4, exact up to 2^11 / 4 = 512 terms).
template <class T>
float exact_value(std::uint64_t h) {
  if constexpr (std::is_same_v<T, Eigen::bfloat16>)
    return static_cast<float>(static_cast<int>(below(h, 3)) - 1);
  else if constexpr (std::is_same_v<T, Eigen::half>)
    return static_cast<float>(static_cast<int>(below(h, 5)) - 2) / 2.0f;
  else
    return static_cast<float>(static_cast<int>(below(h, 17)) - 8) / 8.0f;
}

// exact mode at grid 2^−g: j·2^−g, j uniform in [−2^g, 2^g]; g = 3 gives (below(h, 17) − 8)/8.
// `crossing`: the element lies in a hot row and a hot column (zero_inf mode's non-finite places).
template <class T>
T from_hash(value_mode mode, std::uint64_t h, int grid, bool crossing) {
  using C = wide_t<T>;
  constexpr int D = digits<T>;
  const std::uint64_t h2 = mix(h ^ 0x5851f42d4c957f2dULL);
  C v = C(0);
  switch (mode) {
    case value_mode::exact:
      if constexpr (sizeof(T) == 2) {
        v = static_cast<C>(exact_value<T>(h));
      } else {
        const int scale = 1 << grid;
        v = static_cast<C>(static_cast<int>(below(h, 2 * static_cast<std::uint64_t>(scale) + 1)) -
                           scale) /
            static_cast<C>(scale);
      }
      break;
    case value_mode::uniform: v = uniform<C, D>(h); break;
    case value_mode::wide: v = sign(h2, one_two<C, D>(h) * wide_scale<C>[below(h2, 33)]); break;
    case value_mode::cancel:
      v = sign(h2, (h2 & 2) ? one_two<C, D>(h) * pow2<C>(12) : unit<C, D>(h));
      break;
    case value_mode::nonfinite:
      v = uniform<C, D>(h);
      if ((h2 & 31) == 0) {
        switch (below(h2, 3)) {
          case 0: v = std::numeric_limits<C>::quiet_NaN(); break;
          case 1: v = std::numeric_limits<C>::infinity(); break;
          default: v = -std::numeric_limits<C>::infinity(); break;
        }
      }
      break;
    case value_mode::positive: v = unit<C, D>(h); break;
    case value_mode::zero_inf:
      v = uniform<C, D>(h);
      if (crossing && (h2 & 1) != 0) {
        switch (below(h2, 3)) {
          case 0: v = std::numeric_limits<C>::quiet_NaN(); break;
          case 1: v = std::numeric_limits<C>::infinity(); break;
          default: v = -std::numeric_limits<C>::infinity(); break;
        }
      } else if (((h2 >> 1) & 3) == 0) {
        v = (h2 & 8) != 0 ? -C(0) : C(0);
      }
      break;
  }
  return static_cast<T>(v);
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
  const bool crossing = mode == value_mode::zero_inf && hot(seed, tensor, row_salt, row) &&
                        hot(seed, tensor, col_salt, col);
  return from_hash<T>(mode, counter_hash(seed, tensor, row, col), grid, crossing);
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
  const bool zero_inf = mode == value_mode::zero_inf;
  for (std::uint64_t r = 0; r < rows; ++r) {
    const std::uint64_t prefix = row_prefix(seed, tensor, row0 + r);
    const bool hot_row = zero_inf && hot(seed, tensor, row_salt, row0 + r);
    T* row = out + r * ld;
    for (std::uint64_t c = 0; c < cols; ++c)
      row[c] = from_hash<T>(mode, finish(prefix, col0 + c), grid,
                            hot_row && hot(seed, tensor, col_salt, col0 + c));
  }
}

template <class T>
T partial_share(T v, value_mode mode, std::uint64_t seed, std::uint32_t tensor, std::uint64_t row,
                std::uint64_t col, int coord, int parts, int grid) {
  check_grid(grid);
  if (parts < 1 || coord < 0 || coord >= parts)
    throw error("partial_share: coordinate " + std::to_string(coord) + " of " +
                std::to_string(parts));
  if (parts == 1) return v;
  using C = wide_t<T>;
  constexpr int D = digits<T>;
  const C x = static_cast<C>(v);
  if (x == C(0) && std::signbit(x)) return v;
  const std::uint64_t h = mix(counter_hash(seed, tensor, row, col) ^ 0xd1b54a32d192ed03ULL);
  const int bulk = static_cast<int>(below(h, static_cast<std::uint64_t>(parts)));
  // The grid 2^q and the bound L on |every share and partial sum| / 2^q.
  int q = 1 - D;
  std::int64_t limit = std::int64_t{1} << (D - 1);  // uniform's grid, for 0 and non-finite v
  if (mode == value_mode::exact) {
    if constexpr (std::is_same_v<T, bfloat16_t>) {
      q = 0;
      limit = 1;
    } else if constexpr (std::is_same_v<T, half_t>) {
      q = -1;
      limit = 2;
    } else {
      q = -grid;
      limit = std::int64_t{1} << grid;
    }
  } else if (std::isfinite(x) && x != C(0)) {
    int e = 0;
    (void)std::frexp(x, &e);  // |x| in [2^(e−1), 2^e): its ulp is 2^(e − D)
    q = std::max(e - D, std::numeric_limits<T>::min_exponent - D);
    limit = (std::int64_t{1} << D) - 1;
  }
  const std::int64_t m = std::isfinite(x) ? static_cast<std::int64_t>(std::ldexp(x, -q)) : 0;
  const std::int64_t mag = m < 0 ? -m : m;
  // Offsets toward zero (of v's sign: they shrink the bulk) total at most L/2; away from it at
  // most L − |m|, so that the bulk and every partial sum stay within L.
  const auto others = static_cast<std::uint64_t>(parts - 1);
  const auto toward = static_cast<std::uint64_t>(limit / 2) / others;
  const auto away = static_cast<std::uint64_t>(limit - mag) / others;
  const auto offset = [&](int r) {
    const std::uint64_t hr = mix(h ^ (static_cast<std::uint64_t>(r) + 1) * 0x9e3779b97f4a7c15ULL);
    const bool same = (hr & 1) != 0;
    const auto size = static_cast<std::int64_t>(below(hr, (same ? toward : away) + 1));
    return (same == (m < 0)) ? -size : size;
  };
  if (coord != bulk) return static_cast<T>(std::ldexp(static_cast<C>(offset(coord)), q));
  if (!std::isfinite(x)) return v;
  std::int64_t rest = m;
  for (int r = 0; r < parts; ++r)
    if (r != bulk) rest -= offset(r);
  return static_cast<T>(std::ldexp(static_cast<C>(rest), q));
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
template bfloat16_t element<bfloat16_t>(value_mode, std::uint64_t, std::uint32_t, std::uint64_t,
                                        std::uint64_t, int);
template half_t element<half_t>(value_mode, std::uint64_t, std::uint32_t, std::uint64_t,
                                std::uint64_t, int);
template void fill_block<bfloat16_t>(value_mode, std::uint64_t, std::uint32_t, std::uint64_t,
                                     std::uint64_t, std::uint64_t, std::uint64_t, bfloat16_t*,
                                     std::size_t, int);
template float partial_share<float>(float, value_mode, std::uint64_t, std::uint32_t, std::uint64_t,
                                    std::uint64_t, int, int, int);
template double partial_share<double>(double, value_mode, std::uint64_t, std::uint32_t,
                                      std::uint64_t, std::uint64_t, int, int, int);
template bfloat16_t partial_share<bfloat16_t>(bfloat16_t, value_mode, std::uint64_t, std::uint32_t,
                                              std::uint64_t, std::uint64_t, int, int, int);
template half_t partial_share<half_t>(half_t, value_mode, std::uint64_t, std::uint32_t,
                                      std::uint64_t, std::uint64_t, int, int, int);
template void fill_block<half_t>(value_mode, std::uint64_t, std::uint32_t, std::uint64_t,
                                 std::uint64_t, std::uint64_t, std::uint64_t, half_t*, std::size_t,
                                 int);

}  // namespace shardcheck::ref
