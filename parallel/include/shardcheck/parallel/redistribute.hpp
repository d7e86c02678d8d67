#pragma once
// Redistribution of a rows×cols tensor between placements on a one-axis mesh, with the minimal
// collective for each pair (the rest is local copying):
//
//   from \ to   R              S(0)                 S(1)
//   R           copy           slice (local)        slice (local)
//   S(0)        all-gather     copy                 all-to-all
//   S(1)        all-gather     all-to-all           copy
//   P           all-reduce     reduce-scatter       reduce-scatter
//
// S(0) is split by `rows`, S(1) by `cols` (uneven and empty parts are legal). Nothing can be
// redistributed *to* P but P itself (a copy). Every collective goes through the comm, so the
// ledger records it; redistribution_cost predicts the same entries and the peak bytes.
//
// Buffers (row-major; rank q's share of S(0) is r_q rows, of S(1) c_q columns):
//   S(0)→R  the output, own rows copied in, all-gathered in place             peak M·N
//   S(1)→R  a packed buffer (rank blocks M×c_q one after another), then M×N   peak 2·M·N
//   P→R     a copy of the input, all-reduced in place                         peak M·N
//   P→S(0)  reduce-scatter straight from the input into r_me×N                peak r_me·N
//   P→S(1)  input packed into column blocks, reduce-scattered into M×c_me     peak M·N + M·c_me
//   S(0)→S(1) send blocks r_me×c_q packed; received blocks r_q×c_me land in row order, which is
//           the output itself                                 peak r_me·N + M·c_me + 2 count arrays
//   S(1)→S(0) the input's row blocks r_q×c_me are already in rank order; received blocks
//           r_me×c_q packed, then re-laid into r_me×N          peak 2·r_me·N + 2 count arrays
// Example: M = 5, N = 4, p = 2, rows 3,2, cols 0,4 — S(0)→S(1): rank 0 sends its 3×4 rows to
// rank 1 and receives nothing; rank 1 ends with the whole 5×4.
#include <cstdint>
#include <vector>

#include "shardcheck/parallel/comm.hpp"
#include "shardcheck/parallel/ledger.hpp"
#include "shardcheck/parallel/matrix.hpp"
#include "shardcheck/parallel/placement.hpp"

namespace shardcheck::par {

// A global rows×cols tensor and the partitions its shards use (nullptr where no S needs one).
struct global_shape {
  std::int64_t rows = 0, cols = 0;
  const partition* row_parts = nullptr;  // for S(0)
  const partition* col_parts = nullptr;  // for S(1)
};

// This rank's local extent of a tensor of shape g under placement pl.
[[nodiscard]] std::pair<std::int64_t, std::int64_t> local_extent(const global_shape& g,
                                                                 placement pl, int me);

struct redistribution_cost {
  std::vector<ledger_entry> entries;  // what the comm records, in order (phase left as forward)
  std::int64_t peak_bytes = 0;        // allocated above the input, the output included
};
// Throws invalid_problem for an unsupported pair (anything → P except P → P).
[[nodiscard]] redistribution_cost redistribution_cost_of(const global_shape& g, placement from,
                                                         placement to, int me, int p, dtype type,
                                                         const backend_spec& b);

// Returns this rank's shard of the tensor under `to`, given its shard `in` under `from`.
// \note collective over world.
template <class T>
[[nodiscard]] matrix<T> redistribute(comm& world, const matrix<T>& in, const global_shape& g,
                                     placement from, placement to);

}  // namespace shardcheck::par
