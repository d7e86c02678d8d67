#pragma once
// The state of a recording window (pmpi.hpp), shared by the recording RAII and the wrappers.
#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

#include "shardcheck/parallel/ledger.hpp"
#include "shardcheck/parallel/pmpi.hpp"

namespace shardcheck::par::pmpi::detail {

// A communicator the window records: its axis, this rank's place in it, its own sequence of
// collectives (fingerprinted like a checked comm's), and where its ranks' numbers in the axis's
// communicator are kept (window::ranks; −1: the same numbers).
struct comm_state {
  MPI_Comm comm = MPI_COMM_NULL;
  int axis = 0;
  int rank = 0, size = 1;
  std::uint64_t sequence = 0;
  std::int64_t ranks_at = -1;
};

// A one-sided window on a recorded communicator, whose creation, fences and free are
// fingerprinted and counted in that communicator's sequence, like its collectives. A kernel may
// free the communicator first: the window then keeps a duplicate of it (`owned`), which carries
// the sequence on.
struct rma_state {
  MPI_Win win = MPI_WIN_NULL;
  MPI_Comm comm = MPI_COMM_NULL;
  bool owned = false;
};

// A mesh communicator's ranks, which derived and foreign communicators are compared with.
struct axis_group {
  int axis = 0;
  MPI_Group group = MPI_GROUP_NULL;
};

struct window {
  ledger* log = nullptr;
  bool fingerprint = false;
  interceptor* hook = nullptr;
  perturbation stir;
  std::uint64_t stir_state = 0;                      // the perturbation's generator
  std::chrono::steady_clock::time_point stir_quiet;  // no delay before then
  // Reserved when opened: deriving and adopting allocate nothing below 64 communicators.
  std::vector<comm_state> comms;
  std::vector<MPI_Comm> foreign;   // communicators seen that match no axis (not recorded)
  std::vector<axis_group> groups;  // the axes in order, then the whole mesh (−1)
  std::vector<rma_state> windows;
  std::vector<int> ranks;                                 // rank tables (comm_state::ranks_at)
  std::vector<std::int64_t> counts, recv_counts, displs;  // scratch, one per rank

  // The state of c, or nullptr when c is not recorded.
  [[nodiscard]] comm_state* find(MPI_Comm c);
  // The same, first adopting c (a communicator made outside the window) when its ranks are a
  // mesh communicator's.
  [[nodiscard]] comm_state* find_or_adopt(MPI_Comm c);
  // Records child (just derived from parent; MPI_COMM_NULL ignored).
  void derive(MPI_Comm parent, MPI_Comm child);
  // Stops recording c (about to be freed).
  void forget(MPI_Comm c);
  // The one-sided window w, or nullptr when it is not recorded.
  [[nodiscard]] rma_state* find_window(
      MPI_Win w);  // not find: MPICH's MPI_Win and MPI_Comm are both int
  // Records window w, just created on c.
  void open_rma(MPI_Comm c, MPI_Win w);
  // Stops recording w (freed): frees its duplicate.
  void close_rma(MPI_Win w);
  // Stops recording c (about to be freed); a window on it goes on with a duplicate.
  void free_comm(MPI_Comm c);
  // Sleeps the perturbation's next delay (none when it has no max_delay).
  void perturb();
  [[nodiscard]] std::uint64_t next_stir();
  // Records e as made on s: its axis, its root (peer, target) in the axis's communicator.
  void record(const comm_state& s, ledger_entry e);
  // Rank r of s in its axis's communicator.
  [[nodiscard]] int axis_rank(const comm_state& s, int r) const;
  // n counts, from an array or all equal to v, widened into the scratch (no allocation).
  [[nodiscard]] std::span<const std::int64_t> widen(std::vector<std::int64_t>& into, const int* c,
                                                    int n);
  [[nodiscard]] std::span<const std::int64_t> uniform(std::vector<std::int64_t>& into, int v,
                                                      int n);

 private:
  // The state of c (size, rank, table) recorded as `axis` whose group is `to`.
  comm_state place(MPI_Comm c, MPI_Group group, int axis, MPI_Group to);
  [[nodiscard]] MPI_Group group_of(int axis) const;
  // The axis whose communicator has g's ranks, or `none`.
  [[nodiscard]] int matching_axis(MPI_Group g, int none) const;
};

// The window a wrapper records into: the open one, unless shardcheck's own code is running.
[[nodiscard]] inline window* active() { return internal_depth == 0 ? current : nullptr; }

}  // namespace shardcheck::par::pmpi::detail
