#pragma once
// A case's plan on one rank, computed once: the mesh, this rank's coordinates and, for every
// tensor, its placement, the block it holds and the data stream it is generated from. The
// harness, the properties, `explain` and the benchmarks read the plan instead of re-deriving it.
//
// Example: data_parallel, p = 3, M = 7, N = 5, K = 4, part.M = 3,2,2, on rank 1 (coords {1}):
//   X  S(0)  rows 3+2, cols 0+4     W  R  rows 0+5, cols 0+4     Y  R  rows 0+7, cols 0+5
//   dY S(0)  rows 3+2, cols 0+5     dX S(0) rows 3+2, cols 0+4   dW R  rows 0+5, cols 0+4
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "shardcheck/parallel/kernel.hpp"

namespace shardcheck::par {

struct tensor_plan {
  tensor_slot slot;
  std::string name;                          // "X", "W", "W2", "dY", …
  std::pair<std::string, std::string> dims;  // its rows' and columns' dimension names
  layout where;                              // one placement per mesh axis
  block region;                              // what this rank holds; empty: nothing
  // The counter-based data stream of an input (X, W_l, dY); 0 for an output.
  std::uint32_t data_id = 0;
  [[nodiscard]] bool is_input() const {
    return slot.t == tensor::x || slot.t == tensor::w || slot.t == tensor::dy;
  }
};

struct case_plan {
  std::vector<int> dims, coords;
  std::vector<tensor_plan> tensors;  // in tensors_of order
  std::vector<tensor_slot> outputs;  // Y, dX, dW_1…dW_L
  [[nodiscard]] const tensor_plan& operator[](tensor_slot t) const;
  [[nodiscard]] std::size_t layers() const;
};

// The plan of (already completed and validated) case c at mesh coordinates `coords`. No MPI.
[[nodiscard]] case_plan plan_of(const kernel& k, const run_case& c, std::span<const int> coords);
// The data stream of input t (X, W_1, W_2, …, dY).
[[nodiscard]] std::uint32_t data_id_of(tensor_slot t);

}  // namespace shardcheck::par
