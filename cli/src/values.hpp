#pragma once
// A case's values, whole, on one rank: what `audit` measures and `verify --dump` writes.
//
//   run_and_gather   runs the case once on its ranks and gathers every output block to the
//                    case's rank 0 at its global indices (block-cyclic tiles through their runs):
//                    Y of row_parallel at p = 2 arrives as one M×N matrix
// The single-device view they are judged against (the whole inputs, the reference, the
// high-precision oracle and the magnitude products) is prop::whole_truth (verdict.hpp).
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

}  // namespace shardcheck::values
