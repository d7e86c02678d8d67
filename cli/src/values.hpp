#pragma once
// A case's values, whole, on one rank: what `audit` measures and `verify --dump` writes.
//
//   run_and_gather   runs the case once on its ranks and gathers every output block to the
//                    case's rank 0 at its global indices (block-cyclic tiles through their runs):
//                    Y of row_parallel at p = 2 arrives as one M×N matrix
//   whole_truth      the single-device view of a single layer: the whole inputs, the reference
//                    (OpenBLAS, the case's dtype), the high-precision oracle (oracle.hpp) and
//                    the magnitude products |X||W|ᵀ, |dY||W|, |dY|ᵀ|X|
#include <cstdint>
#include <string>
#include <vector>

#include "shardcheck/parallel/comm.hpp"
#include "shardcheck/parallel/kernel.hpp"
#include "shardcheck/properties/harness.hpp"

namespace shardcheck::values {

// One output tensor gathered whole, row-major, widened to double (exact for f32 and f64).
struct gathered_tensor {
  par::tensor_slot slot;
  std::string name;  // "Y", "dX", "dW", …
  std::int64_t rows = 0, cols = 0;
  std::vector<double> value;   // NaN where no rank held the element
  std::int64_t missing = 0;    // elements no rank held
  std::int64_t conflicts = 0;  // elements two ranks held with different bits
};

struct gathered {
  std::vector<gathered_tensor> outputs;    // in outputs_of(c) order: Y, dX, dW_1 … dW_L
  bool chains_claimed = false;             // every rank claims its chains
  std::vector<par::chain_lengths> chains;  // per layer, the longest over the ranks (and reduced)
};

// Runs forward and backward of c once on this rank of case_comm (size c.p) and gathers every
// output to its rank 0; the other ranks get the chains only. Throws error when the kernel throws
// or an output's shape differs from its placement (every rank alike, after an exchange).
// \note collective over case_comm.
[[nodiscard]] gathered run_and_gather(const prop::subject& s, const par::run_case& c,
                                      par::comm& case_comm);

// A single layer's whole inputs and, per output (Y, dX, dW), the reference, the oracle and the
// magnitude product. k_ref: the reference's chain (K, N, M). T bf16 or f16 (mixed.hpp): the
// inputs widened to f32 (exact), the reference summed in f32 (`unrounded`, b) and rounded to T
// once, the oracle and magnitudes of the same exact products.
template <class T>
struct truth {
  std::vector<T> x, w, dy;
  struct output {
    std::string name;
    std::int64_t rows = 0, cols = 0, k_ref = 0;
    std::vector<T> reference;
    std::vector<float> unrounded;  // b, for bf16 and f16 only
    std::vector<double> oracle, magnitude;
  };
  output out[3];  // Y, dX, dW
};

// Throws invalid_problem for a stack (the oracle is a single layer's) or a size past memory.
template <class T>
[[nodiscard]] truth<T> whole_truth(const par::run_case& c);

}  // namespace shardcheck::values
