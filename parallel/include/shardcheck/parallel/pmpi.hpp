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
// Recorded: Allreduce, Allgather(v), Reduce_scatter(_block), Bcast, Reduce, Alltoall(v), Barrier
// and their MPI_I* forms (recorded when started, with their whole payload); Send, Ssend, Isend,
// Issend, Recv, Irecv, Sendrecv, Sendrecv_replace (a send entry, then a receive entry; a receive
// is recorded with its buffer's count, and with the source that matched when it was
// MPI_ANY_SOURCE and blocking). Point-to-point messages are not fingerprinted.
// One-sided MPI (one_sided.cpp), on a window whose communicator is recorded: MPI_Win_create,
// _allocate, _allocate_shared, _create_dynamic (win_create, elements = this rank's window bytes),
// MPI_Win_free, MPI_Win_fence — fingerprinted like collectives, on the window's communicator —;
// MPI_Put, Get, Accumulate, Get_accumulate, Fetch_and_op, Compare_and_swap and the request forms
// Rput, Rget, Raccumulate, Rget_accumulate (as their blocking kinds: bytes are the origin
// datatype's count × size, the target rank in `root`); MPI_Win_lock, _unlock, _lock_all,
// _unlock_all, _flush, _flush_all, _flush_local, _flush_local_all, _post, _start, _complete,
// _wait (no bytes). Example: on a window over ctx.grid.axis(0), MPI_Put of 6 doubles to rank 1
// records put axis=0 elements=6 elem_bytes=8 sent=48 received=0 target=1.
// Not recorded: rooted collectives other than Bcast and Reduce (Gather, Scatter, Scan, …),
// persistent communication, neighbourhood collectives, inter-communicators, MPI_Win_attach,
// _detach, _sync and _test.
//
// Axes. A communicator the window was opened with records as its mesh axis (the whole mesh: −1).
// Any other communicator — derived inside the window (MPI_Comm_split, _split_type, _dup,
// _dup_with_info, _create, _create_group, MPI_Cart_create, MPI_Cart_sub), or one a library made
// before (a duplicate of MPI_COMM_WORLD at its start-up) — records as the mesh axis whose
// communicator has the same ranks (MPI_Group_compare: identical or similar; the axes first, then
// the whole mesh), with a sequence of its own, until MPI_Comm_free or the window's end. A derived
// one that matches none records as the axis of the one it came from; a library's own that matches
// none is not recorded. Ranks in entries (a root, a peer, a target) are those of the axis's
// communicator. Example: a kernel on a 2 × 3 mesh that duplicates ctx.grid.axis(1) and
// all-reduces 12 doubles on the duplicate records all_reduce axis=1 elements=12 elem_bytes=8; one
// that splits ctx.grid.all() by mesh row records axis=1 (each row's group is its axis-1
// communicator's); one that splits off a half of an axis records that axis; on a 1-D mesh a
// duplicate of ctx.grid.all() records axis 0.
//
// Interception. A window may carry an interceptor (a layer installed from outside the kernel, e.g.
// fault injection): every recorded collective (blocking or started) is handed to it twice,
// before its fingerprint (`above`: what it runs instead is fingerprinted and recorded as the
// kernel's call) and around the MPI call itself (`below`: the ledger records the call asked for).
//
// Perturbation. A window may stir the schedule (`perturbation`): before each call whose effect
// depends on the order in which ranks reach it — a one-sided write (MPI_Put, Accumulate,
// Get_accumulate, Fetch_and_op, Compare_and_swap and their request forms), MPI_Win_lock, a send
// (Send, Ssend, Isend, Issend, Sendrecv, Sendrecv_replace) — on a recorded communicator, this
// rank sleeps a delay drawn from [0, max_delay], then makes none for a time drawn from
// [0, 2·max_delay] (a library that polls, e.g. a lock taken by Fetch_and_op in a loop, pays on
// average at most about a third of its time), both drawn by a generator seeded with `seed` (the
// same seed, the same stream of draws; which calls meet them follows the wall clock). The
// determinism property's second run opens one, so that a result that depends on arrival order
// (accumulates applied as they come, MPI_ANY_SOURCE, MPI_Waitany) differs from the first run's, as
// it would on a loaded machine, not only when the timing happens to change.
#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <type_traits>

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

// A collective a wrapper is about to run, as an interceptor sees it. Counts are in
// elements of `type`, as par::call's: all_gather count = Σ counts, reduce_scatter count = this
// rank's part, all_reduce and broadcast the buffer's elements.
struct raw_collective {
  collective kind = collective::barrier;
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, size = 1;    // this rank's place in comm
  const void* in = nullptr;  // the send buffer; nullptr when in place (MPI_IN_PLACE)
  void* out = nullptr;       // the result buffer
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_Op op = MPI_OP_NULL;
  std::int64_t count = 0;
  std::span<const std::int64_t> counts, displs;  // all_gather, reduce_scatter: one per rank
  int root = -1;                                 // broadcast, reduce
  MPI_Request* request = nullptr;                // a started (MPI_I…) call's; else nullptr
};

// What a wrapper's `run` is: a reference to a callable returning an MPI code, allocation-free.
class run_ref {
 public:
  template <class F>
  requires(!std::is_same_v<std::remove_cvref_t<F>, run_ref>) run_ref(F& f)
      : f_(&f), call_([](void* g) { return (*static_cast<F*>(g))(); }) {}
  int operator()() const { return call_(f_); }

 private:
  void* f_;
  int (*call_)(void*);
};

// A hook on the recorded collectives of a window (see "Interception" above). MPI calls it makes
// itself go through the wrappers like the kernel's, and reach it again: it passes those on.
class interceptor {
 public:
  enum class stage { above, below };
  virtual ~interceptor() = default;
  // Returns the MPI code of the call; `run` runs c as asked (above: fingerprinted, run and
  // recorded, with the `below` hand-over inside; below: the MPI call alone).
  virtual int intercept(stage s, const raw_collective& c, run_ref run) = 0;
};

// A communicator a window records, and the mesh axis its entries carry.
struct tracked_comm {
  MPI_Comm comm = MPI_COMM_NULL;
  int axis = 0;
};

// A window's perturbation (see "Perturbation" above); max_delay 0: none.
struct perturbation {
  std::uint64_t seed = 0;
  std::chrono::microseconds max_delay{0};
};

// The recording window: raw MPI calls on `comms` (and on communicators with the same ranks, see
// "Axes") are recorded into `log` while it is alive; fingerprint turns the cross-rank check on. One
// window at a time. Allocates only when constructed, so open it outside a measured scope.
class recording {
 public:
  // hook: optional, not owned; it must outlive the window.
  recording(ledger& log, bool fingerprint, std::span<const tracked_comm> comms,
            interceptor* hook = nullptr, perturbation stir = {});
  ~recording();
  recording(const recording&) = delete;
  recording& operator=(const recording&) = delete;

 private:
  std::unique_ptr<detail::window> window_;
};

// Whether this program links shardcheck::pmpi (without it raw MPI calls go unrecorded).
[[nodiscard]] bool linked();

}  // namespace shardcheck::par::pmpi
