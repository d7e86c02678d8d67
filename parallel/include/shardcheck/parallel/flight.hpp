#pragma once
// The flight recorder: ranks out of step, named within seconds instead of hanging.
//
// While a case runs, each rank records its communication — every collective the checking layer
// (checked_collectives) or a raw-MPI wrapper (pmpi.hpp) fingerprints: kind, count, element size,
// root, communicator and call index — and the phase it is in (forward, backward, returned). Every
// wait that can hang on another rank is a watched wait: the fingerprint exchange before each
// collective (all ranks of its communicator must reach it) and the harness's first exchange after
// the kernel returns (all ranks of the case must). A watched wait is the non-blocking form of the
// call, tested until done; nothing else happens while it completes in time.
//
// A wait that lasts longer than `report_after` (20 ms) sends this rank's state to every rank of
// the case over a communicator of its own (point-to-point, nothing collective): what it waits in,
// on which ranks, its last completed call, and how far it got: the calls it completed on each
// communicator in this run of the kernel. Leaving a reported wait withdraws the report. A rank
// holding a current report from every rank of the case judges them:
//   - a wait in call #k on communicator C can complete iff every member of C waits in call #k on
//     a communicator of the same members, or has gone past it (completed more than k calls on a
//     communicator of C's members); a member elsewhere, or returned short of it, never joins it;
//   - the wait after the kernel can complete iff every rank has returned.
// When no reported wait can complete, the rank asks every other whether it is still in the wait
// it was reported in (a report may be stale, its withdrawal on the way); each answers from inside
// its wait, after testing it once more. When all say so, the snapshot held at once — a rank
// leaves a wait only when it can complete — and no message in flight can change it: the ranks
// are out of step. The rank sends the verdict to the others, and every rank throws out_of_step
// with the same message, which names every rank's state and the ranks out of step, e.g.
//   ranks out of step: rank 0 waits in all_reduce #1 on axis 0 (8 × 8 B) in backward after 0
//   calls; rank 1 returned from backward after 0 calls there, its last call all_gather #0 on
//   axis 0 (4 × 8 B); out of step: rank 1
// No time decides it: the judgement needs only that every rank reported a wait. It errs only
// towards waiting: communicators of the same members are not told apart (a member past call #k on
// any of them counts as past it), and a rank that never reports (computing, or blocked in a call
// not watched, such as a raw MPI_Recv) stops any judgement; the case watchdog remains for those.
//
// Abandoned calls. The non-blocking calls the ranks were waiting in can never complete and cannot
// be cancelled; their buffers stay allocated, their communicators are never freed (abandoned(c)),
// and while the case's watch is open no rank of it frees any communicator (keeps_communicators),
// so that MPI never reuses one a call is still addressed to. The harness then ends the case
// without further collectives on its communicators, and the driver replaces the case's
// communicator.
//
// One watch is open at a time (shardcheck calls MPI from one thread); without one, a watched wait
// is MPI_Wait.
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "shardcheck/parallel/ledger.hpp"
#include "shardcheck/reference/types.hpp"

namespace shardcheck::par::flight {

// Thrown by a watched wait on every rank of a case whose ranks are out of step.
struct out_of_step : mpi_error {
  using mpi_error::mpi_error;
};

// A collective as the recorder keeps it.
struct call_record {
  collective kind = collective::barrier;
  std::int64_t count = 0;
  std::size_t elem_bytes = 0;
  int root = -1;
  std::uint64_t index = 0;  // its sequence number on its communicator
  MPI_Comm comm = MPI_COMM_NULL;
};

// The watch of one case: opened by the driver around a case on every rank of it, on `reports`, a
// communicator of the case's ranks kept for this use (only point-to-point messages travel on it).
// `serial` tells this case's messages from those an earlier case left unread; it is the same on
// every rank.
class watch {
 public:
  watch(MPI_Comm reports, std::uint64_t serial);
  ~watch();
  watch(const watch&) = delete;
  watch& operator=(const watch&) = delete;
};

// While a watch is open (else they do nothing):
// names a communicator in messages ("the mesh", "axis 0"); others are named by their ranks;
void name(MPI_Comm c, std::string label);
// sets the phase the kernel is in ("forward", "backward") and resets the phase's call count;
void phase(std::string p);
// true once this case's ranks were found out of step (on every rank of the case alike).
[[nodiscard]] bool case_abandoned();
// Whether a watch is open.
[[nodiscard]] bool watching();

// Records a collective that every rank of its communicator has reached (its fingerprint agreed).
void completed(const call_record& c);

// Waits for a started collective `r` on `comm`: the fingerprint exchange of call `what` (all
// ranks of comm), tested until done. Throws out_of_step when the case's ranks are out of step.
void wait_in_call(MPI_Request& r, const call_record& what);
// Waits for the harness's first exchange after the kernel, started on the case's communicator.
// `note`: why the kernel returned, if not normally (an exception's message), for the report.
void wait_returned(MPI_Request& r, MPI_Comm comm, const std::string& note);

// Receives every report still unread on `reports`, a communicator watches were opened on: the
// ranks count what they sent each other there and exchange the counts. Once at the end of a run.
// \note collective over reports.
void drain(MPI_Comm reports);

// Called before MPI frees communicator c: what the recorder needs of it is taken now.
void forget(MPI_Comm c);
// True once the open watch's case was found out of step: until the watch closes, no communicator
// is freed, on any rank of the case (a rank's call abandoned on one may still be addressed to
// another rank that would free it).
[[nodiscard]] bool keeps_communicators();

// A communicator a call was abandoned on, never to be freed: abandon(c) marks one (the driver
// marks the case's communicator on every rank), abandoned(c) asks.
void abandon(MPI_Comm c);
[[nodiscard]] bool abandoned(MPI_Comm c);

// Progress, as the watchdog reads it from its own thread: calls completed in watched cases, the
// time of the last one, and since when this rank waits in a watched wait (0: not waiting), in
// steady_clock nanoseconds.
struct progress {
  std::uint64_t calls = 0;
  std::int64_t last_call_ns = 0, waiting_since_ns = 0;
  std::string waiting_in;  // the call waited in ("" when not waiting)
};
[[nodiscard]] progress progress_now();

}  // namespace shardcheck::par::flight
