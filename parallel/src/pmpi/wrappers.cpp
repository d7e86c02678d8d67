// The MPI_* entry points of pmpi.hpp: each calls its PMPI_* twin and, inside a recording window,
// on a recorded communicator, fingerprints it (collectives) and records it in the ledger.
// Example: MPI_Allgatherv of counts {2·5, 3·5} doubles on rank 0 of an axis-0 comm of 2 records
// all_gather axis=0 elements=25 elem_bytes=8 sent=80 received=120, as par::comm would.
#include <mpi.h>

#include <cstddef>
#include <cstdint>

#include "pmpi/window.hpp"
#include "shardcheck/parallel/comm.hpp"
#include "shardcheck/parallel/flight.hpp"
#include "shardcheck/parallel/memory.hpp"

extern "C" void shardcheck_pmpi_wrappers() {}

namespace {
using shardcheck::mem::mpi_heap;
using shardcheck::par::backend;
using shardcheck::par::collective;
using shardcheck::par::ledger_entry;
using shardcheck::par::pmpi::interceptor;
using shardcheck::par::pmpi::raw_collective;
using shardcheck::par::pmpi::detail::comm_state;
using shardcheck::par::pmpi::detail::window;
namespace par = shardcheck::par;

// The window and the state of comm when this call is to be recorded; {nullptr, nullptr} otherwise.
// Alive for the whole wrapper: what MPI allocates meanwhile is counted as MPI's (memory.hpp).
struct target {
  window* w = nullptr;
  comm_state* s = nullptr;
  mpi_heap in_mpi{};
  explicit operator bool() const { return s != nullptr; }
};
target recorded(MPI_Comm comm) {
  window* w = par::pmpi::detail::active();
  if (w == nullptr) return {};
  return {w, w->find_or_adopt(comm)};
}

std::size_t bytes_of(MPI_Datatype t) {
  int s = 0;
  PMPI_Type_size(t, &s);
  return static_cast<std::size_t>(s);
}

// A collective: fingerprinted first (count as checked_collectives compares it), then run, then
// its entry recorded if it succeeded. With an interceptor, described by `describe` and handed to
// it before the fingerprint and around the run.
template <class F>
int checked_call(const target& t, const ledger_entry& e, std::int64_t count, int root, F& run) {
  const std::uint64_t sequence = t.s->sequence++;
  if (t.w->fingerprint) {
    const par::pmpi::internal own;
    par::compare_fingerprint(t.s->comm, sequence, e.kind, e.elem_bytes, count, root);
  }
  const int rc = run();
  if (rc == MPI_SUCCESS) t.w->record(*t.s, e);
  return rc;
}

template <class D, class F>
int collective_call(const target& t, const ledger_entry& e, std::int64_t count, int root,
                    D describe, F run) {
  interceptor* hook = t.w->hook;
  if (hook == nullptr) return checked_call(t, e, count, root, run);
  const raw_collective c = describe();
  auto below = [&] { return hook->intercept(interceptor::stage::below, c, run); };
  auto above = [&] { return checked_call(t, e, count, root, below); };
  return hook->intercept(interceptor::stage::above, c, above);
}

// What an interceptor is handed of a call on t.
raw_collective raw(const target& t, collective kind, const void* in, void* out, MPI_Datatype type,
                   std::int64_t count) {
  raw_collective c;
  c.kind = kind;
  c.comm = t.s->comm;
  c.rank = t.s->rank;
  c.size = t.s->size;
  c.in = in == MPI_IN_PLACE ? nullptr : in;
  c.out = out;
  c.type = type;
  c.count = count;
  return c;
}

// Displacements of counts laid end to end, or as given.
std::span<const std::int64_t> packed(const target& t, std::span<const std::int64_t> counts) {
  std::int64_t at = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    t.w->displs[i] = at;
    at += counts[i];
  }
  return {t.w->displs.data(), counts.size()};
}

ledger_entry barrier_entry() {
  ledger_entry e;
  e.kind = collective::barrier;
  return e;
}

void record(const target& t, const ledger_entry& e) { t.w->record(*t.s, e); }

// A derived communicator records with its parent's axis.
int derived(MPI_Comm parent, int rc, const MPI_Comm* child) {
  if (rc != MPI_SUCCESS) return rc;
  if (window* w = par::pmpi::detail::active()) w->derive(parent, *child);
  return rc;
}

std::int64_t sum(std::span<const std::int64_t> c) {
  std::int64_t s = 0;
  for (const std::int64_t v : c) s += v;
  return s;
}

// Entries of the gather / scatter / all-to-all families from MPI's int arrays.
ledger_entry gather_entry(const target& t, std::span<const std::int64_t> counts,
                          MPI_Datatype type) {
  return par::all_gather_entry(backend::mpi, counts, t.s->rank, bytes_of(type));
}
ledger_entry scatter_entry(const target& t, std::span<const std::int64_t> counts,
                           MPI_Datatype type) {
  return par::reduce_scatter_entry(backend::mpi, counts, t.s->rank, bytes_of(type));
}
ledger_entry reduce_entry(const target& t, int count, MPI_Datatype type) {
  return par::all_reduce_entry(backend::mpi, count, t.s->rank, t.s->size, bytes_of(type));
}
ledger_entry bcast_entry(const target& t, int count, int root, MPI_Datatype type) {
  return par::broadcast_entry(backend::mpi, count, root, t.s->rank, t.s->size, bytes_of(type));
}
ledger_entry reduce_entry(const target& t, int count, int root, MPI_Datatype type) {
  return par::reduce_entry(count, root, t.s->rank, t.s->size, bytes_of(type));
}
}  // namespace

extern "C" {

// ---- collectives ------------------------------------------------------------------------------

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm) {
  const target t = recorded(comm);
  if (!t) return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  return collective_call(
      t, reduce_entry(t, count, datatype), count, -1,
      [&] {
        auto c = raw(t, collective::all_reduce, sendbuf, recvbuf, datatype, count);
        c.op = op;
        return c;
      },
      [&] { return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm); });
}

int MPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                   MPI_Comm comm, MPI_Request* request) {
  const target t = recorded(comm);
  if (!t) return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
  return collective_call(
      t, reduce_entry(t, count, datatype), count, -1,
      [&] {
        auto c = raw(t, collective::all_reduce, sendbuf, recvbuf, datatype, count);
        c.op = op;
        c.request = request;
        return c;
      },
      [&] { return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request); });
}

int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  const target t = recorded(comm);
  if (!t) return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  const auto counts = t.w->uniform(t.w->counts, recvcount, t.s->size);
  return collective_call(
      t, gather_entry(t, counts, recvtype), sum(counts), -1,
      [&] {
        auto c = raw(t, collective::all_gather, sendbuf, recvbuf, recvtype, sum(counts));
        c.counts = counts;
        c.displs = packed(t, counts);
        return c;
      },
      [&] {
        return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
      });
}

int MPI_Iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                   int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  const target t = recorded(comm);
  if (!t)
    return PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                           request);
  const auto counts = t.w->uniform(t.w->counts, recvcount, t.s->size);
  return collective_call(
      t, gather_entry(t, counts, recvtype), sum(counts), -1,
      [&] {
        auto c = raw(t, collective::all_gather, sendbuf, recvbuf, recvtype, sum(counts));
        c.counts = counts;
        c.displs = packed(t, counts);
        c.request = request;
        return c;
      },
      [&] {
        return PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                               request);
      });
}

int MPI_Allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                   const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                   MPI_Comm comm) {
  const target t = recorded(comm);
  if (!t)
    return PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                           comm);
  const auto counts = t.w->widen(t.w->counts, recvcounts, t.s->size);
  return collective_call(
      t, gather_entry(t, counts, recvtype), sum(counts), -1,
      [&] {
        auto c = raw(t, collective::all_gather, sendbuf, recvbuf, recvtype, sum(counts));
        c.counts = counts;
        c.displs = t.w->widen(t.w->displs, displs, t.s->size);
        return c;
      },
      [&] {
        return PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                               comm);
      });
}

int MPI_Iallgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                    const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                    MPI_Comm comm, MPI_Request* request) {
  const target t = recorded(comm);
  if (!t)
    return PMPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                            comm, request);
  const auto counts = t.w->widen(t.w->counts, recvcounts, t.s->size);
  return collective_call(
      t, gather_entry(t, counts, recvtype), sum(counts), -1,
      [&] {
        auto c = raw(t, collective::all_gather, sendbuf, recvbuf, recvtype, sum(counts));
        c.counts = counts;
        c.displs = t.w->widen(t.w->displs, displs, t.s->size);
        c.request = request;
        return c;
      },
      [&] {
        return PMPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                                comm, request);
      });
}

int MPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[],
                       MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  const target t = recorded(comm);
  if (!t) return PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm);
  const auto counts = t.w->widen(t.w->counts, recvcounts, t.s->size);
  return collective_call(
      t, scatter_entry(t, counts, datatype), sum(counts), -1,
      [&] {
        auto c = raw(t, collective::reduce_scatter, sendbuf, recvbuf, datatype,
                     counts[static_cast<std::size_t>(t.s->rank)]);
        c.op = op;
        c.counts = counts;
        c.displs = packed(t, counts);
        return c;
      },
      [&] { return PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm); });
}

int MPI_Ireduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[],
                        MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  const target t = recorded(comm);
  if (!t) return PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, request);
  const auto counts = t.w->widen(t.w->counts, recvcounts, t.s->size);
  return collective_call(
      t, scatter_entry(t, counts, datatype), sum(counts), -1,
      [&] {
        auto c = raw(t, collective::reduce_scatter, sendbuf, recvbuf, datatype,
                     counts[static_cast<std::size_t>(t.s->rank)]);
        c.op = op;
        c.counts = counts;
        c.displs = packed(t, counts);
        c.request = request;
        return c;
      },
      [&] {
        return PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, request);
      });
}

int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount,
                             MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  const target t = recorded(comm);
  if (!t) return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm);
  const auto counts = t.w->uniform(t.w->counts, recvcount, t.s->size);
  return collective_call(
      t, scatter_entry(t, counts, datatype), sum(counts), -1,
      [&] {
        auto c = raw(t, collective::reduce_scatter, sendbuf, recvbuf, datatype, recvcount);
        c.op = op;
        c.counts = counts;
        c.displs = packed(t, counts);
        return c;
      },
      [&] { return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm); });
}

int MPI_Ireduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount,
                              MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                              MPI_Request* request) {
  const target t = recorded(comm);
  if (!t)
    return PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, request);
  const auto counts = t.w->uniform(t.w->counts, recvcount, t.s->size);
  return collective_call(
      t, scatter_entry(t, counts, datatype), sum(counts), -1,
      [&] {
        auto c = raw(t, collective::reduce_scatter, sendbuf, recvbuf, datatype, recvcount);
        c.op = op;
        c.counts = counts;
        c.displs = packed(t, counts);
        c.request = request;
        return c;
      },
      [&] {
        return PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, request);
      });
}

int MPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  const target t = recorded(comm);
  if (!t) return PMPI_Bcast(buffer, count, datatype, root, comm);
  return collective_call(
      t, bcast_entry(t, count, root, datatype), count, root,
      [&] {
        auto c = raw(t, collective::broadcast, nullptr, buffer, datatype, count);
        c.root = root;
        return c;
      },
      [&] { return PMPI_Bcast(buffer, count, datatype, root, comm); });
}

// A rooted reduction (BLACS's ?gsum2d combines PBLAS's partial products with one).
int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
               int root, MPI_Comm comm) {
  const target t = recorded(comm);
  if (!t) return PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm);
  return collective_call(
      t, reduce_entry(t, count, root, datatype), count, root,
      [&] {
        auto c = raw(t, collective::reduce, sendbuf, recvbuf, datatype, count);
        c.op = op;
        c.root = root;
        return c;
      },
      [&] { return PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm); });
}

int MPI_Ireduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                int root, MPI_Comm comm, MPI_Request* request) {
  const target t = recorded(comm);
  if (!t) return PMPI_Ireduce(sendbuf, recvbuf, count, datatype, op, root, comm, request);
  return collective_call(
      t, reduce_entry(t, count, root, datatype), count, root,
      [&] {
        auto c = raw(t, collective::reduce, sendbuf, recvbuf, datatype, count);
        c.op = op;
        c.root = root;
        c.request = request;
        return c;
      },
      [&] { return PMPI_Ireduce(sendbuf, recvbuf, count, datatype, op, root, comm, request); });
}

int MPI_Ibcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
               MPI_Request* request) {
  const target t = recorded(comm);
  if (!t) return PMPI_Ibcast(buffer, count, datatype, root, comm, request);
  return collective_call(
      t, bcast_entry(t, count, root, datatype), count, root,
      [&] {
        auto c = raw(t, collective::broadcast, nullptr, buffer, datatype, count);
        c.root = root;
        c.request = request;
        return c;
      },
      [&] { return PMPI_Ibcast(buffer, count, datatype, root, comm, request); });
}

// All-to-all: one element size (the receive type's); in place, the send counts are the receive
// counts. The fingerprint compares no count (they differ by rank).
int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  const target t = recorded(comm);
  if (!t) return PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  const int sent = sendbuf == MPI_IN_PLACE ? recvcount : sendcount;
  const auto send = t.w->uniform(t.w->counts, sent, t.s->size);
  const auto recv = t.w->uniform(t.w->recv_counts, recvcount, t.s->size);
  const ledger_entry e =
      par::all_to_all_entry(backend::mpi, send, recv, t.s->rank, bytes_of(recvtype));
  return collective_call(
      t, e, 0, -1,
      [&] {
        auto c = raw(t, collective::all_to_all, sendbuf, recvbuf, recvtype, sum(recv));
        return c;
      },
      [&] {
        return PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
      });
}

int MPI_Ialltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  const target t = recorded(comm);
  if (!t)
    return PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                          request);
  const int sent = sendbuf == MPI_IN_PLACE ? recvcount : sendcount;
  const auto send = t.w->uniform(t.w->counts, sent, t.s->size);
  const auto recv = t.w->uniform(t.w->recv_counts, recvcount, t.s->size);
  const ledger_entry e =
      par::all_to_all_entry(backend::mpi, send, recv, t.s->rank, bytes_of(recvtype));
  return collective_call(
      t, e, 0, -1,
      [&] {
        auto c = raw(t, collective::all_to_all, sendbuf, recvbuf, recvtype, sum(recv));
        c.request = request;
        return c;
      },
      [&] {
        return PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                              request);
      });
}

int MPI_Alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                  MPI_Datatype sendtype, void* recvbuf, const int recvcounts[], const int rdispls[],
                  MPI_Datatype recvtype, MPI_Comm comm) {
  const target t = recorded(comm);
  if (!t)
    return PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                          recvtype, comm);
  const int* sent = sendbuf == MPI_IN_PLACE ? recvcounts : sendcounts;
  const auto send = t.w->widen(t.w->counts, sent, t.s->size);
  const auto recv = t.w->widen(t.w->recv_counts, recvcounts, t.s->size);
  const ledger_entry e =
      par::all_to_all_entry(backend::mpi, send, recv, t.s->rank, bytes_of(recvtype));
  return collective_call(
      t, e, 0, -1,
      [&] {
        auto c = raw(t, collective::all_to_all, sendbuf, recvbuf, recvtype, sum(recv));
        return c;
      },
      [&] {
        return PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                              recvtype, comm);
      });
}

int MPI_Ialltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                   MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                   const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                   MPI_Request* request) {
  const target t = recorded(comm);
  if (!t)
    return PMPI_Ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                           recvtype, comm, request);
  const int* sent = sendbuf == MPI_IN_PLACE ? recvcounts : sendcounts;
  const auto send = t.w->widen(t.w->counts, sent, t.s->size);
  const auto recv = t.w->widen(t.w->recv_counts, recvcounts, t.s->size);
  const ledger_entry e =
      par::all_to_all_entry(backend::mpi, send, recv, t.s->rank, bytes_of(recvtype));
  return collective_call(
      t, e, 0, -1,
      [&] {
        auto c = raw(t, collective::all_to_all, sendbuf, recvbuf, recvtype, sum(recv));
        c.request = request;
        return c;
      },
      [&] {
        return PMPI_Ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                               recvtype, comm, request);
      });
}

int MPI_Barrier(MPI_Comm comm) {
  const target t = recorded(comm);
  if (!t) return PMPI_Barrier(comm);
  return collective_call(
      t, barrier_entry(), 0, -1,
      [&] {
        auto c = raw(t, collective::barrier, nullptr, nullptr, MPI_DATATYPE_NULL, 0);
        return c;
      },
      [&] { return PMPI_Barrier(comm); });
}

int MPI_Ibarrier(MPI_Comm comm, MPI_Request* request) {
  const target t = recorded(comm);
  if (!t) return PMPI_Ibarrier(comm, request);
  return collective_call(
      t, barrier_entry(), 0, -1,
      [&] {
        auto c = raw(t, collective::barrier, nullptr, nullptr, MPI_DATATYPE_NULL, 0);
        c.request = request;
        return c;
      },
      [&] { return PMPI_Ibarrier(comm, request); });
}

// ---- point-to-point ---------------------------------------------------------------------------

int MPI_Send(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  const mpi_heap in_mpi;
  const target t = recorded(comm);
  if (t) t.w->perturb();
  const int rc = PMPI_Send(buf, count, datatype, dest, tag, comm);
  if (t && rc == MPI_SUCCESS) record(t, par::send_entry(count, dest, bytes_of(datatype)));
  return rc;
}

int MPI_Ssend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  const mpi_heap in_mpi;
  const target t = recorded(comm);
  if (t) t.w->perturb();
  const int rc = PMPI_Ssend(buf, count, datatype, dest, tag, comm);
  if (t && rc == MPI_SUCCESS) record(t, par::send_entry(count, dest, bytes_of(datatype)));
  return rc;
}

int MPI_Isend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
              MPI_Request* request) {
  const mpi_heap in_mpi;
  const target t = recorded(comm);
  if (t) t.w->perturb();
  const int rc = PMPI_Isend(buf, count, datatype, dest, tag, comm, request);
  if (t && rc == MPI_SUCCESS) record(t, par::send_entry(count, dest, bytes_of(datatype)));
  return rc;
}

int MPI_Issend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
               MPI_Request* request) {
  const mpi_heap in_mpi;
  const target t = recorded(comm);
  if (t) t.w->perturb();
  const int rc = PMPI_Issend(buf, count, datatype, dest, tag, comm, request);
  if (t && rc == MPI_SUCCESS) record(t, par::send_entry(count, dest, bytes_of(datatype)));
  return rc;
}

int MPI_Recv(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
             MPI_Status* status) {
  const target t = recorded(comm);
  if (!t) return PMPI_Recv(buf, count, datatype, source, tag, comm, status);
  MPI_Status mine;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &mine : status;
  const int rc = PMPI_Recv(buf, count, datatype, source, tag, comm, st);
  const int from = source == MPI_ANY_SOURCE ? st->MPI_SOURCE : source;
  if (rc == MPI_SUCCESS) record(t, par::recv_entry(count, from, bytes_of(datatype)));
  return rc;
}

int MPI_Irecv(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
              MPI_Request* request) {
  const mpi_heap in_mpi;
  const int rc = PMPI_Irecv(buf, count, datatype, source, tag, comm, request);
  if (const target t = recorded(comm); t && rc == MPI_SUCCESS)
    record(t, par::recv_entry(count, source, bytes_of(datatype)));
  return rc;
}

int MPI_Sendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                 void* recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                 MPI_Comm comm, MPI_Status* status) {
  const target t = recorded(comm);
  if (!t)
    return PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype,
                         source, recvtag, comm, status);
  t.w->perturb();
  MPI_Status mine;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &mine : status;
  const int rc = PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount,
                               recvtype, source, recvtag, comm, st);
  if (rc != MPI_SUCCESS) return rc;
  record(t, par::send_entry(sendcount, dest, bytes_of(sendtype)));
  const int from = source == MPI_ANY_SOURCE ? st->MPI_SOURCE : source;
  record(t, par::recv_entry(recvcount, from, bytes_of(recvtype)));
  return rc;
}

int MPI_Sendrecv_replace(void* buf, int count, MPI_Datatype datatype, int dest, int sendtag,
                         int source, int recvtag, MPI_Comm comm, MPI_Status* status) {
  const target t = recorded(comm);
  if (!t)
    return PMPI_Sendrecv_replace(buf, count, datatype, dest, sendtag, source, recvtag, comm,
                                 status);
  t.w->perturb();
  MPI_Status mine;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &mine : status;
  const int rc =
      PMPI_Sendrecv_replace(buf, count, datatype, dest, sendtag, source, recvtag, comm, st);
  if (rc != MPI_SUCCESS) return rc;
  record(t, par::send_entry(count, dest, bytes_of(datatype)));
  const int from = source == MPI_ANY_SOURCE ? st->MPI_SOURCE : source;
  record(t, par::recv_entry(count, from, bytes_of(datatype)));
  return rc;
}

// ---- communicators ----------------------------------------------------------------------------

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm* newcomm) {
  const mpi_heap in_mpi;
  return derived(comm, PMPI_Comm_dup(comm, newcomm), newcomm);
}

int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm* newcomm) {
  const mpi_heap in_mpi;
  return derived(comm, PMPI_Comm_dup_with_info(comm, info, newcomm), newcomm);
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* newcomm) {
  const mpi_heap in_mpi;
  return derived(comm, PMPI_Comm_split(comm, color, key, newcomm), newcomm);
}

int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm* newcomm) {
  const mpi_heap in_mpi;
  return derived(comm, PMPI_Comm_split_type(comm, split_type, key, info, newcomm), newcomm);
}

int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm* newcomm) {
  const mpi_heap in_mpi;
  return derived(comm, PMPI_Comm_create(comm, group, newcomm), newcomm);
}

int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm* newcomm) {
  const mpi_heap in_mpi;
  return derived(comm, PMPI_Comm_create_group(comm, group, tag, newcomm), newcomm);
}

int MPI_Cart_create(MPI_Comm comm_old, int ndims, const int dims[], const int periods[],
                    int reorder, MPI_Comm* comm_cart) {
  const mpi_heap in_mpi;
  return derived(comm_old, PMPI_Cart_create(comm_old, ndims, dims, periods, reorder, comm_cart),
                 comm_cart);
}

int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm* newcomm) {
  const mpi_heap in_mpi;
  return derived(comm, PMPI_Cart_sub(comm, remain_dims, newcomm), newcomm);
}

// Forgotten whoever frees it: MPI may hand the handle out again. One a call was abandoned on
// (flight.hpp) is kept: MPI must never reuse it.
int MPI_Comm_free(MPI_Comm* comm) {
  const mpi_heap in_mpi;
  if (comm != nullptr && (shardcheck::par::flight::abandoned(*comm) ||
                          shardcheck::par::flight::keeps_communicators())) {
    *comm = MPI_COMM_NULL;
    return MPI_SUCCESS;
  }
  if (comm != nullptr) shardcheck::par::flight::forget(*comm);
  if (window* w = shardcheck::par::pmpi::detail::current; w != nullptr && comm != nullptr) {
    const shardcheck::par::pmpi::internal own;
    w->free_comm(*comm);
  }
  return PMPI_Comm_free(comm);
}

}  // extern "C"
