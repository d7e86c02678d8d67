#pragma once
// Counter-based test data: every element is a pure function of (seed, tensor id, global row,
// global column, mode). Any rank generates exactly its own block; no state, no communication.
#include <cstddef>
#include <cstdint>

#include "shardcheck/reference/types.hpp"

namespace shardcheck::ref {

// Tensor ids used by the harness; strategies never generate data themselves.
enum class tensor_id : std::uint32_t { x = 1, w = 2, dy = 3, w2 = 4, dz = 5 };

// A 64-bit hash of the four counters (splitmix64 finaliser chained over them).
[[nodiscard]] std::uint64_t counter_hash(std::uint64_t seed, std::uint32_t tensor,
                                         std::uint64_t row, std::uint64_t col);

// `grid` is exact mode's: values j·2^−grid, |j| ≤ 2^grid (3: multiples of 1/8 in [−1, 1]; a
// stack's long contractions choose a coarser one, stack.hpp exact_grid); other modes ignore it.
template <class T>
[[nodiscard]] T element(value_mode mode, std::uint64_t seed, std::uint32_t tensor,
                        std::uint64_t row, std::uint64_t col, int grid = 3);

// Fills the block rows [row0, row0+rows) × cols [col0, col0+cols) of a global tensor into `out`
// (row-major, leading dimension `ld`, which defaults to cols).
template <class T>
void fill_block(value_mode mode, std::uint64_t seed, std::uint32_t tensor, std::uint64_t row0,
                std::uint64_t rows, std::uint64_t col0, std::uint64_t cols, T* out,
                std::size_t ld = 0, int grid = 3);

// The sign model the statistical tier's data-aware bound rests on (bound.hpp data_aware_bound):
// in `mode`, is every element's sign a fair coin, independent of its magnitude and of every
// other element? uniform, wide and cancel: yes, with one exception, uniform's −1 (its grid
// [−1, 1) has no +1); fixed_sign names such values. exact, positive, nonfinite, zero_inf: no.
[[nodiscard]] constexpr bool signs_symmetric(value_mode mode) {
  return mode == value_mode::uniform || mode == value_mode::wide || mode == value_mode::cancel;
}
// A value of a sign-symmetric mode whose sign is not a fair coin given its magnitude.
template <class T>
[[nodiscard]] constexpr bool fixed_sign(value_mode mode, T v) {
  return mode == value_mode::uniform && v == T(-1);
}

// An input placed P (partial sums pending) on a mesh axis of `parts` coordinates: the share of
// value v (element (row, col) of tensor `tensor`, generated in `mode`) that coordinate `coord`
// holds. The shares sum to v exactly, in any order and any tree (every partial sum is an
// integer multiple of one power of two 2^q below 2^D·2^q, D the dtype's significand bits), and
// they are asymmetric: which coordinate holds the bulk is drawn per element, the others hold
// offsets of random magnitude and sign on the same grid (2^q: v's ulp; in exact mode the mode's
// grid, every share and partial sum within [-1, 1] so exact sums stay exact). A rule that reads
// one share as the value, scales one share by p or takes a fixed coordinate's share fails on
// most elements. NaN and ±Inf go to the bulk coordinate whole (the offsets are finite); −0 is
// −0 on every coordinate (+0 + −0 would be +0). parts = 1 gives v.
// Example (f32, p = 3): v = 0.75 = 3·2^23·2^-24 (q = −24) might split as 0.5078125, −0.0078125,
// 0.25 — in any order the partial sums are multiples of 2^-24 below 1.
template <class T>
[[nodiscard]] T partial_share(T v, value_mode mode, std::uint64_t seed, std::uint32_t tensor,
                              std::uint64_t row, std::uint64_t col, int coord, int parts,
                              int grid = 3);

}  // namespace shardcheck::ref
