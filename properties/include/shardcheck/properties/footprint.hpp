#pragma once
// The resource check: what a case would hold on one rank, compared with a limit before the case
// runs, so that a shape too large for the machine is refused with its footprint instead of being
// attempted. Example: data_parallel, p = 2, M = N = K = 100000, f64: rank 0 holds X's block
// (40 GB), W (80 GB), Y (80 GB, twice for the determinism re-run), the reference … → refused.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "shardcheck/parallel/kernel.hpp"
#include "shardcheck/properties/harness.hpp"

namespace shardcheck::prop {

// Bytes rank `coords` holds for case c (completed and validated) when the properties of `mask`
// (harness.hpp) are checked: its inputs' and outputs' blocks (outputs twice where determinism,
// memory or invariance runs the kernel again; inputs twice where memory re-runs it at a smaller
// memory-bounding parameter), the reference of each judged output block (Y with
// forward, dX and dW with backward) with the input panels the reference reads (a share of the
// inner dimension when r ranks hold the block) and a double magnitude per element (a stack's
// whole reference, which every rank computes), and the kernel's claimed peak above its inputs —
// or its blocks once more when it claims none. Checked arithmetic: invalid_problem on overflow.
[[nodiscard]] std::int64_t rank_footprint(const par::kernel& k, const par::run_case& c,
                                          std::span<const int> coords,
                                          unsigned mask = all_properties);

struct footprint {
  std::int64_t bytes = 0;  // the largest rank's
  int rank = 0;            // which
};
// The largest rank_footprint over c's p ranks; with invariance in `mask` on a kernel that claims
// it, at least the largest rank's outputs (kept) beside each variant's run (its footprint with no
// property).
[[nodiscard]] footprint footprint_of(const par::kernel& k, const par::run_case& c,
                                     unsigned mask = all_properties);

// The default limit per rank: three quarters of this machine's memory, shared by the
// `ranks_here` ranks running on it, where the machine's memory is the lowest of its physical
// memory and its cgroup's memory limit (cgroup v2 memory.max, v1 memory.limit_in_bytes, of this
// process's cgroup and those above it); and at most three quarters of the address space a
// process may take (RLIMIT_AS, `ulimit -v`).
[[nodiscard]] std::int64_t default_memory_limit(int ranks_here);

// Throws invalid_problem when case c's footprint is above `limit` bytes per rank, e.g.
// "case for data_parallel needs 120.0 GiB on rank 0 (harness buffers, reference and the kernel's
// claimed peak), above the memory limit of 4.0 GiB per rank (--memory-limit)".
void check_footprint(const par::kernel& k, const par::run_case& c, std::int64_t limit,
                     unsigned mask = all_properties);

// The default limit for the ranks of MPI_COMM_WORLD on this rank's node (MPI_Comm_split_type).
[[nodiscard]] std::int64_t default_memory_limit_here();

// "2GiB", "512M", "1.5G", "1000000": a byte count from 1 B to below 8 EiB (K, M, G, T, with or
// without "iB" or "B", are powers of 1024), given as `option`; else invalid_problem naming it.
[[nodiscard]] std::int64_t parse_bytes(const std::string& text, std::string_view option);

// 512 B, 1.5 KiB, 3.0 MiB, 2.0 GiB.
[[nodiscard]] std::string human_bytes(std::int64_t b);

}  // namespace shardcheck::prop
