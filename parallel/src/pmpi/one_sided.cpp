// The one-sided MPI_* entry points of pmpi.hpp: each calls its PMPI_* twin and, inside a recording
// window, on a window whose communicator is recorded, records it in the ledger; creation, free and
// fence are fingerprinted first, in the communicator's sequence of collectives: a rank that skips
// a fence and goes on to a collective (or frees the window) fails "collective mismatch".
// Example: two ranks of axis 0 each MPI_Put 3 doubles into the other's window between two fences:
// win_create (elements = the window's bytes), win_fence, put elements=3 elem_bytes=8 sent=24
// target=1 (on rank 0), win_fence, win_free.
#include <mpi.h>

#include <cstddef>
#include <cstdint>

#include "pmpi/window.hpp"
#include "shardcheck/parallel/comm.hpp"
#include "shardcheck/parallel/memory.hpp"

namespace {
using shardcheck::mem::mpi_heap;
using shardcheck::par::collective;
using shardcheck::par::ledger_entry;
using shardcheck::par::pmpi::detail::comm_state;
using shardcheck::par::pmpi::detail::rma_state;
using shardcheck::par::pmpi::detail::window;
namespace par = shardcheck::par;
namespace detail = shardcheck::par::pmpi::detail;

std::size_t bytes_of(MPI_Datatype t) {
  int s = 0;
  PMPI_Type_size(t, &s);
  return static_cast<std::size_t>(s);
}

// The window and the state of win's communicator when this call is to be recorded;
// {nullptr, nullptr} otherwise.
struct target {
  window* w = nullptr;
  comm_state* s = nullptr;
  explicit operator bool() const { return s != nullptr; }
};
target recorded(MPI_Win win) {
  window* w = detail::active();
  if (w == nullptr) return {};
  const rma_state* r = w->find_window(win);
  return r == nullptr ? target{} : target{w, w->find(r->comm)};
}

// A call all ranks of the communicator make (creation, free, fence): fingerprinted in the
// communicator's sequence, then run, then e recorded if it succeeded.
template <class F>
int collective_call(const target& t, const ledger_entry& e, F run) {
  const std::uint64_t sequence = t.s->sequence++;
  if (t.w->fingerprint) {
    const par::pmpi::internal own;
    par::compare_fingerprint(t.s->comm, sequence, e.kind, 0, 0, -1);
  }
  const int rc = run();
  if (rc == MPI_SUCCESS) t.w->record(*t.s, e);
  return rc;
}

// Before a call whose effect depends on the order ranks reach it: the window's perturbation.
void perturb(MPI_Win win) {
  if (const target t = recorded(win)) t.w->perturb();
}

// Runs a call on win and records e (built from its arguments) if it succeeded.
template <class E, class F>
int one_sided_call(MPI_Win win, E entry, F run) {
  const int rc = run();
  if (rc != MPI_SUCCESS) return rc;
  if (const target t = recorded(win)) t.w->record(*t.s, entry());
  return rc;
}

// A window created on comm (when recorded): the creation fingerprinted, run and recorded with this
// rank's bytes; the window recorded from then on.
template <class F>
int created(MPI_Comm comm, MPI_Aint bytes, const MPI_Win* win, F run) {
  window* w = detail::active();
  comm_state* s = w != nullptr ? w->find_or_adopt(comm) : nullptr;
  if (s == nullptr) return run();
  const int rc =
      collective_call(target{w, s}, par::win_create_entry(static_cast<std::int64_t>(bytes)), run);
  if (rc == MPI_SUCCESS) w->open_rma(comm, *win);
  return rc;
}

int group_size(MPI_Group g) {
  int n = 0;
  PMPI_Group_size(g, &n);
  return n;
}
}  // namespace

extern "C" {

// ---- windows ----------------------------------------------------------------------------------

int MPI_Win_create(void* base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm,
                   MPI_Win* win) {
  const mpi_heap in_mpi;  // what MPI allocates here is MPI's (memory.hpp)
  return created(comm, size, win,
                 [&] { return PMPI_Win_create(base, size, disp_unit, info, comm, win); });
}

int MPI_Win_allocate(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void* baseptr,
                     MPI_Win* win) {
  const mpi_heap in_mpi;  // what MPI allocates here is MPI's (memory.hpp)
  return created(comm, size, win,
                 [&] { return PMPI_Win_allocate(size, disp_unit, info, comm, baseptr, win); });
}

int MPI_Win_allocate_shared(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm,
                            void* baseptr, MPI_Win* win) {
  const mpi_heap in_mpi;  // what MPI allocates here is MPI's (memory.hpp)
  return created(comm, size, win, [&] {
    return PMPI_Win_allocate_shared(size, disp_unit, info, comm, baseptr, win);
  });
}

int MPI_Win_create_dynamic(MPI_Info info, MPI_Comm comm, MPI_Win* win) {
  const mpi_heap in_mpi;  // what MPI allocates here is MPI's (memory.hpp)
  return created(comm, 0, win, [&] { return PMPI_Win_create_dynamic(info, comm, win); });
}

// Forgotten whoever frees it: MPI may hand the handle out again.
int MPI_Win_free(MPI_Win* win) {
  const mpi_heap in_mpi;  // what MPI allocates here is MPI's (memory.hpp)
  if (win == nullptr) return PMPI_Win_free(win);
  const MPI_Win handle = *win;
  const target t = recorded(handle);
  const int rc = t ? collective_call(t, par::win_sync_entry(collective::win_free),
                                     [&] { return PMPI_Win_free(win); })
                   : PMPI_Win_free(win);
  if (window* w = detail::current; w != nullptr && rc == MPI_SUCCESS) {
    const par::pmpi::internal own;
    w->close_rma(handle);
  }
  return rc;
}

int MPI_Win_fence(int assert, MPI_Win win) {
  const mpi_heap in_mpi;  // what MPI allocates here is MPI's (memory.hpp)
  const target t = recorded(win);
  if (!t) return PMPI_Win_fence(assert, win);
  return collective_call(t, par::win_sync_entry(collective::win_fence),
                         [&] { return PMPI_Win_fence(assert, win); });
}

// ---- communication ----------------------------------------------------------------------------

int MPI_Put(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype,
            int target_rank, MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype,
            MPI_Win win) {
  const mpi_heap in_mpi;  // what MPI allocates here is MPI's (memory.hpp)
  perturb(win);
  return one_sided_call(
      win, [&] { return par::put_entry(origin_count, target_rank, bytes_of(origin_datatype)); },
      [&] {
        return PMPI_Put(origin_addr, origin_count, origin_datatype, target_rank, target_disp,
                        target_count, target_datatype, win);
      });
}

int MPI_Rput(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype,
             int target_rank, MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype,
             MPI_Win win, MPI_Request* request) {
  const mpi_heap in_mpi;  // what MPI allocates here is MPI's (memory.hpp)
  perturb(win);
  return one_sided_call(
      win, [&] { return par::put_entry(origin_count, target_rank, bytes_of(origin_datatype)); },
      [&] {
        return PMPI_Rput(origin_addr, origin_count, origin_datatype, target_rank, target_disp,
                         target_count, target_datatype, win, request);
      });
}

int MPI_Get(void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
            MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Win win) {
  const mpi_heap in_mpi;  // what MPI allocates here is MPI's (memory.hpp)
  return one_sided_call(
      win, [&] { return par::get_entry(origin_count, target_rank, bytes_of(origin_datatype)); },
      [&] {
        return PMPI_Get(origin_addr, origin_count, origin_datatype, target_rank, target_disp,
                        target_count, target_datatype, win);
      });
}

int MPI_Rget(void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
             MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Win win,
             MPI_Request* request) {
  const mpi_heap in_mpi;  // what MPI allocates here is MPI's (memory.hpp)
  return one_sided_call(
      win, [&] { return par::get_entry(origin_count, target_rank, bytes_of(origin_datatype)); },
      [&] {
        return PMPI_Rget(origin_addr, origin_count, origin_datatype, target_rank, target_disp,
                         target_count, target_datatype, win, request);
      });
}

int MPI_Accumulate(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype,
                   int target_rank, MPI_Aint target_disp, int target_count,
                   MPI_Datatype target_datatype, MPI_Op op, MPI_Win win) {
  const mpi_heap in_mpi;  // what MPI allocates here is MPI's (memory.hpp)
  perturb(win);
  return one_sided_call(
      win,
      [&] { return par::accumulate_entry(origin_count, target_rank, bytes_of(origin_datatype)); },
      [&] {
        return PMPI_Accumulate(origin_addr, origin_count, origin_datatype, target_rank, target_disp,
                               target_count, target_datatype, op, win);
      });
}

int MPI_Raccumulate(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype,
                    int target_rank, MPI_Aint target_disp, int target_count,
                    MPI_Datatype target_datatype, MPI_Op op, MPI_Win win, MPI_Request* request) {
  const mpi_heap in_mpi;  // what MPI allocates here is MPI's (memory.hpp)
  perturb(win);
  return one_sided_call(
      win,
      [&] { return par::accumulate_entry(origin_count, target_rank, bytes_of(origin_datatype)); },
      [&] {
        return PMPI_Raccumulate(origin_addr, origin_count, origin_datatype, target_rank,
                                target_disp, target_count, target_datatype, op, win, request);
      });
}

int MPI_Get_accumulate(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype,
                       void* result_addr, int result_count, MPI_Datatype result_datatype,
                       int target_rank, MPI_Aint target_disp, int target_count,
                       MPI_Datatype target_datatype, MPI_Op op, MPI_Win win) {
  const mpi_heap in_mpi;  // what MPI allocates here is MPI's (memory.hpp)
  perturb(win);
  return one_sided_call(
      win,
      [&] {
        return par::get_accumulate_entry(origin_count, target_rank, bytes_of(origin_datatype),
                                         static_cast<std::int64_t>(result_count) *
                                             static_cast<std::int64_t>(bytes_of(result_datatype)));
      },
      [&] {
        return PMPI_Get_accumulate(origin_addr, origin_count, origin_datatype, result_addr,
                                   result_count, result_datatype, target_rank, target_disp,
                                   target_count, target_datatype, op, win);
      });
}

int MPI_Rget_accumulate(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype,
                        void* result_addr, int result_count, MPI_Datatype result_datatype,
                        int target_rank, MPI_Aint target_disp, int target_count,
                        MPI_Datatype target_datatype, MPI_Op op, MPI_Win win,
                        MPI_Request* request) {
  const mpi_heap in_mpi;  // what MPI allocates here is MPI's (memory.hpp)
  perturb(win);
  return one_sided_call(
      win,
      [&] {
        return par::get_accumulate_entry(origin_count, target_rank, bytes_of(origin_datatype),
                                         static_cast<std::int64_t>(result_count) *
                                             static_cast<std::int64_t>(bytes_of(result_datatype)));
      },
      [&] {
        return PMPI_Rget_accumulate(origin_addr, origin_count, origin_datatype, result_addr,
                                    result_count, result_datatype, target_rank, target_disp,
                                    target_count, target_datatype, op, win, request);
      });
}

int MPI_Fetch_and_op(const void* origin_addr, void* result_addr, MPI_Datatype datatype,
                     int target_rank, MPI_Aint target_disp, MPI_Op op, MPI_Win win) {
  const mpi_heap in_mpi;  // what MPI allocates here is MPI's (memory.hpp)
  perturb(win);
  return one_sided_call(
      win, [&] { return par::fetch_and_op_entry(target_rank, bytes_of(datatype)); },
      [&] {
        return PMPI_Fetch_and_op(origin_addr, result_addr, datatype, target_rank, target_disp, op,
                                 win);
      });
}

int MPI_Compare_and_swap(const void* origin_addr, const void* compare_addr, void* result_addr,
                         MPI_Datatype datatype, int target_rank, MPI_Aint target_disp,
                         MPI_Win win) {
  const mpi_heap in_mpi;  // what MPI allocates here is MPI's (memory.hpp)
  perturb(win);
  return one_sided_call(
      win, [&] { return par::compare_and_swap_entry(target_rank, bytes_of(datatype)); },
      [&] {
        return PMPI_Compare_and_swap(origin_addr, compare_addr, result_addr, datatype, target_rank,
                                     target_disp, win);
      });
}

// ---- synchronisation --------------------------------------------------------------------------

int MPI_Win_lock(int lock_type, int rank, int assert, MPI_Win win) {
  const mpi_heap in_mpi;  // what MPI allocates here is MPI's (memory.hpp)
  perturb(win);
  return one_sided_call(
      win, [&] { return par::win_sync_entry(collective::win_lock, rank); },
      [&] { return PMPI_Win_lock(lock_type, rank, assert, win); });
}

int MPI_Win_unlock(int rank, MPI_Win win) {
  const mpi_heap in_mpi;  // what MPI allocates here is MPI's (memory.hpp)
  return one_sided_call(
      win, [&] { return par::win_sync_entry(collective::win_unlock, rank); },
      [&] { return PMPI_Win_unlock(rank, win); });
}

int MPI_Win_lock_all(int assert, MPI_Win win) {
  const mpi_heap in_mpi;  // what MPI allocates here is MPI's (memory.hpp)
  return one_sided_call(
      win, [&] { return par::win_sync_entry(collective::win_lock_all); },
      [&] { return PMPI_Win_lock_all(assert, win); });
}

int MPI_Win_unlock_all(MPI_Win win) {
  const mpi_heap in_mpi;  // what MPI allocates here is MPI's (memory.hpp)
  return one_sided_call(
      win, [&] { return par::win_sync_entry(collective::win_unlock_all); },
      [&] { return PMPI_Win_unlock_all(win); });
}

int MPI_Win_flush(int rank, MPI_Win win) {
  const mpi_heap in_mpi;  // what MPI allocates here is MPI's (memory.hpp)
  return one_sided_call(
      win, [&] { return par::win_sync_entry(collective::win_flush, rank); },
      [&] { return PMPI_Win_flush(rank, win); });
}

int MPI_Win_flush_all(MPI_Win win) {
  const mpi_heap in_mpi;  // what MPI allocates here is MPI's (memory.hpp)
  return one_sided_call(
      win, [&] { return par::win_sync_entry(collective::win_flush_all); },
      [&] { return PMPI_Win_flush_all(win); });
}

int MPI_Win_flush_local(int rank, MPI_Win win) {
  const mpi_heap in_mpi;  // what MPI allocates here is MPI's (memory.hpp)
  return one_sided_call(
      win, [&] { return par::win_sync_entry(collective::win_flush_local, rank); },
      [&] { return PMPI_Win_flush_local(rank, win); });
}

int MPI_Win_flush_local_all(MPI_Win win) {
  const mpi_heap in_mpi;  // what MPI allocates here is MPI's (memory.hpp)
  return one_sided_call(
      win, [&] { return par::win_sync_entry(collective::win_flush_local_all); },
      [&] { return PMPI_Win_flush_local_all(win); });
}

int MPI_Win_post(MPI_Group group, int assert, MPI_Win win) {
  const mpi_heap in_mpi;  // what MPI allocates here is MPI's (memory.hpp)
  return one_sided_call(
      win, [&] { return par::win_sync_entry(collective::win_post, -1, group_size(group)); },
      [&] { return PMPI_Win_post(group, assert, win); });
}

int MPI_Win_start(MPI_Group group, int assert, MPI_Win win) {
  const mpi_heap in_mpi;  // what MPI allocates here is MPI's (memory.hpp)
  return one_sided_call(
      win, [&] { return par::win_sync_entry(collective::win_start, -1, group_size(group)); },
      [&] { return PMPI_Win_start(group, assert, win); });
}

int MPI_Win_complete(MPI_Win win) {
  const mpi_heap in_mpi;  // what MPI allocates here is MPI's (memory.hpp)
  return one_sided_call(
      win, [&] { return par::win_sync_entry(collective::win_complete); },
      [&] { return PMPI_Win_complete(win); });
}

int MPI_Win_wait(MPI_Win win) {
  const mpi_heap in_mpi;  // what MPI allocates here is MPI's (memory.hpp)
  return one_sided_call(
      win, [&] { return par::win_sync_entry(collective::win_wait); },
      [&] { return PMPI_Win_wait(win); });
}

}  // extern "C"
