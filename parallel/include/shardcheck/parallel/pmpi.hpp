#pragma once
// Raw MPI calls recorded through the profiling interface (PMPI).
//
// A kernel may call MPI itself on the communicators it is handed
// (ctx.grid.axis(a).native_handle(), ctx.grid.all().native_handle()) and on any communicator it
// derives from them. The object library shardcheck::pmpi defines those MPI_* entry points; each
// calls its PMPI_* twin. Inside a recording window (the harness opens one around a kernel's
// forward and backward) a wrapper also
//   - fingerprints a collective across the ranks of its communicator first, exactly as
//     checked_collectives does (sequence per communicator, kind, element size, count, root), so
//     that a rank skipping or changing a raw collective fails with "collective mismatch";
//   - records the call in the window's ledger with the entries of ledger.hpp's `mpi` formulas
//     (the logical payload: Open MPI's algorithm is unknown), whatever the case's backend=, and
//     elem_bytes = MPI_Type_size of the datatype.
// Outside a window, or inside shardcheck's own code (an `internal` guard is alive on this
// thread), a wrapper only forwards.
//
// Recorded: Allreduce, Allgather(v), Reduce_scatter(_block), Bcast, Alltoall(v), Barrier and
// their MPI_I* forms (recorded when started, with their whole payload); Send, Ssend, Isend,
// Issend, Recv, Irecv, Sendrecv, Sendrecv_replace (a send entry, then a receive entry; a receive
// is recorded with its buffer's count, and with the source that matched when it was
// MPI_ANY_SOURCE and blocking). Point-to-point messages are not fingerprinted.
// Not recorded: rooted collectives other than Bcast (Reduce, Gather, Scatter, Scan, …),
// persistent and one-sided communication, neighbourhood collectives, inter-communicators.
//
// Axes. A communicator the window was opened with records as its mesh axis (the whole mesh: −1).
// A communicator derived inside the window (MPI_Comm_split, _split_type, _dup, _dup_with_info,
// _create, _create_group, MPI_Cart_create, MPI_Cart_sub) records as the axis of the one it came
// from, with a sequence of its own, until MPI_Comm_free or the window's end. Example: a kernel
// on a 2 × 3 mesh that duplicates ctx.grid.axis(1) and all-reduces 12 doubles on the duplicate
// records all_reduce axis=1 elements=12 elem_bytes=8; one that splits ctx.grid.all() records
// axis=−1.
#include <mpi.h>

#include <memory>
#include <span>

#include "shardcheck/parallel/ledger.hpp"

namespace shardcheck::par::pmpi {

namespace detail {
struct window;
// The open recording window, if any (shardcheck calls MPI from one thread).
inline window* current = nullptr;
// > 0 while shardcheck's own code runs on this thread.
inline thread_local int internal_depth = 0;
}  // namespace detail

// MPI_Abort called by a kernel or a library it calls (not by shardcheck: an `internal` guard is
// alive), in a program that links shardcheck::pmpi (abort.cpp): the handler runs first, and is
// expected to end the job itself (last_words.hpp's says what aborted and ends the job with exit
// code 6); if it returns, or none is set, the call goes on to MPI.
using abort_handler = void (*)(MPI_Comm comm, int code);
inline abort_handler on_abort = nullptr;

// Marks shardcheck's own MPI calls: while one is alive on this thread, no wrapper records.
// par::comm's typed methods hold one, which covers the checker, both implementations and any
// fault layer below them.
class internal {
 public:
  internal() noexcept { ++detail::internal_depth; }
  ~internal() { --detail::internal_depth; }
  internal(const internal&) = delete;
  internal& operator=(const internal&) = delete;
};

// A communicator a window records, and the mesh axis its entries carry.
struct tracked_comm {
  MPI_Comm comm = MPI_COMM_NULL;
  int axis = 0;
};

// The recording window: raw MPI calls on `comms` (and on communicators derived from them) are
// recorded into `log` while it is alive; fingerprint turns the cross-rank check on. One window at
// a time. Allocates only when constructed, so open it outside a measured scope.
class recording {
 public:
  recording(ledger& log, bool fingerprint, std::span<const tracked_comm> comms);
  ~recording();
  recording(const recording&) = delete;
  recording& operator=(const recording&) = delete;

 private:
  std::unique_ptr<detail::window> window_;
};

// Whether this program links shardcheck::pmpi (without it raw MPI calls go unrecorded).
[[nodiscard]] bool linked();

}  // namespace shardcheck::par::pmpi
