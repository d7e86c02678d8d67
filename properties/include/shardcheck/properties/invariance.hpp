#pragma once
// The invariance property and the outputs' digests: a case's outputs set against the same global
// case's under another setting (another p, partition, backend or parameter value), wherever each
// run placed its elements, and a digest of each output that baselines keep across versions.
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "shardcheck/parallel/kernel.hpp"
#include "shardcheck/properties/harness.hpp"

namespace shardcheck::prop {

// The same global case under another setting the kernel claims (kernel_info::invariant).
struct variant {
  std::string setting;  // what changed: "p=1", "part.M=7,2,3", "backend=native", "micro=2"
  std::string base;     // the same setting in the case: "p=3", "part.M=4,4,4", "backend=mpi"
  par::run_case c;      // complete and valid
};

// The variants of case c (complete and valid) that k's claims call for, one per claimed setting,
// each complete and valid: a smaller p, the smallest the kernel takes (1 unless it declines it:
// every p is set against p = 1, and the case's replay line, on c.p ranks, runs both); the splits
// it draws balanced, or uneven when they are balanced; the other backend (and for a native case
// the native one with its all-reduce and broadcast algorithms pinned to the others); each claimed
// parameter
// at another value it takes (its fallback, minimum or maximum, or one beside its value). A
// setting with no such case (p = 1 for either of the first two) has no variant. No MPI.
[[nodiscard]] std::vector<variant> variants_of(const par::kernel& k, const par::run_case& c);

// The outputs of case c in order (Y, dX, dW_1 …): each one's name and its global row count.
struct output_shape {
  std::string name;
  std::int64_t rows = 0;
};
[[nodiscard]] std::vector<output_shape> output_shapes(const par::kernel& k, const par::run_case& c);

// Each output's digest, the same whichever ranks hold which elements and how often: per global
// row, the sum modulo 2⁶⁴ of a hash of (row, column, bits) over the row's elements, every NaN
// taken as one NaN (as the replica check does), each element counted once (kept_outputs::counted).
struct output_digests {
  std::vector<std::vector<std::uint64_t>> rows;  // per output, per global row
  // One output's digest: a hash of its rows' in order.
  [[nodiscard]] std::uint64_t of(std::size_t output) const;
  friend bool operator==(const output_digests&, const output_digests&) = default;
};
// \note collective over comm: every rank passes what it kept of the case (maybe nothing).
[[nodiscard]] output_digests digest(const kept_outputs& mine,
                                    const std::vector<output_shape>& shapes, MPI_Comm comm);

// Where two runs' outputs first differ, on the leader (rank 0 of comm): the first output and
// global row whose digests differ, and in it the first column whose bits do, with both values:
//   Y[i=3, j=1] is 0.52734375 (0x3fe0e00000000000) at p=3 and 0.5273437500000001 (…) at p=1
// "" elsewhere, and everywhere when the digests agree. \note collective over comm.
[[nodiscard]] std::string first_difference(const kept_outputs& a, const output_digests& da,
                                           const std::string& setting_a, const kept_outputs& b,
                                           const output_digests& db, const std::string& setting_b,
                                           const std::vector<output_shape>& shapes, MPI_Comm comm);

}  // namespace shardcheck::prop
