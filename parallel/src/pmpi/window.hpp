#pragma once
// The state of a recording window (pmpi.hpp), shared by the recording RAII and the wrappers.
#include <mpi.h>

#include <cstdint>
#include <span>
#include <vector>

#include "shardcheck/parallel/ledger.hpp"
#include "shardcheck/parallel/pmpi.hpp"

namespace shardcheck::par::pmpi::detail {

// A communicator the window records: its axis, this rank's place in it, and its own sequence of
// collectives (fingerprinted like a checked comm's).
struct comm_state {
  MPI_Comm comm = MPI_COMM_NULL;
  int axis = 0;
  int rank = 0, size = 1;
  std::uint64_t sequence = 0;
};

struct window {
  ledger* log = nullptr;
  bool fingerprint = false;
  std::vector<comm_state> comms;  // reserved when opened: deriving allocates nothing below 64
  std::vector<std::int64_t> counts, recv_counts;  // scratch, one per rank of the largest comm

  // The state of c, or nullptr when c is not recorded.
  [[nodiscard]] comm_state* find(MPI_Comm c);
  // Records child (just derived from parent; MPI_COMM_NULL ignored) with parent's axis.
  void derive(MPI_Comm parent, MPI_Comm child);
  // Stops recording c (about to be freed).
  void forget(MPI_Comm c);
  // n counts, from an array or all equal to v, widened into the scratch (no allocation).
  [[nodiscard]] std::span<const std::int64_t> widen(std::vector<std::int64_t>& into, const int* c,
                                                    int n);
  [[nodiscard]] std::span<const std::int64_t> uniform(std::vector<std::int64_t>& into, int v,
                                                      int n);
};

// The window a wrapper records into: the open one, unless shardcheck's own code is running.
[[nodiscard]] inline window* active() { return internal_depth == 0 ? current : nullptr; }

}  // namespace shardcheck::par::pmpi::detail
