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

}  // namespace shardcheck::ref
