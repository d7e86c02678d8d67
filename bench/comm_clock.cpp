// The profiling-interface clock of comm_clock.hpp.
#include "comm_clock.hpp"

#include <mpi.h>

namespace shardcheck::bench {
collective_clock comm_clock;
}  // namespace shardcheck::bench

namespace {
using shardcheck::bench::comm_clock;

template <class F>
int timed(F&& call) {
  if (!comm_clock.running) return call();
  const double t0 = PMPI_Wtime();
  const int rc = call();
  comm_clock.seconds += PMPI_Wtime() - t0;
  return rc;
}
}  // namespace

extern "C" {
int MPI_Allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                   const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                   MPI_Comm comm) {
  return timed([&] {
    return PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                           comm);
  });
}
int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm) {
  return timed([&] { return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm); });
}
int MPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[],
                       MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return timed(
      [&] { return PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm); });
}
int MPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  return timed([&] { return PMPI_Bcast(buffer, count, datatype, root, comm); });
}
int MPI_Alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                  MPI_Datatype sendtype, void* recvbuf, const int recvcounts[], const int rdispls[],
                  MPI_Datatype recvtype, MPI_Comm comm) {
  return timed([&] {
    return PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                          recvtype, comm);
  });
}
int MPI_Barrier(MPI_Comm comm) {
  return timed([&] { return PMPI_Barrier(comm); });
}
int MPI_Iallgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                    const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                    MPI_Comm comm, MPI_Request* request) {
  return timed([&] {
    return PMPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                            comm, request);
  });
}
int MPI_Send(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  return timed([&] { return PMPI_Send(buf, count, datatype, dest, tag, comm); });
}
int MPI_Recv(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
             MPI_Status* status) {
  return timed([&] { return PMPI_Recv(buf, count, datatype, source, tag, comm, status); });
}
int MPI_Sendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                 void* recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                 MPI_Comm comm, MPI_Status* status) {
  return timed([&] {
    return PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype,
                         source, recvtag, comm, status);
  });
}
int MPI_Isend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
              MPI_Request* request) {
  return timed([&] { return PMPI_Isend(buf, count, datatype, dest, tag, comm, request); });
}
int MPI_Irecv(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
              MPI_Request* request) {
  return timed([&] { return PMPI_Irecv(buf, count, datatype, source, tag, comm, request); });
}
int MPI_Wait(MPI_Request* request, MPI_Status* status) {
  return timed([&] { return PMPI_Wait(request, status); });
}
int MPI_Waitall(int count, MPI_Request requests[], MPI_Status* statuses) {
  return timed([&] { return PMPI_Waitall(count, requests, statuses); });
}
int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  return timed([&] { return PMPI_Test(request, flag, status); });
}
int MPI_Testall(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]) {
  return timed([&] { return PMPI_Testall(count, requests, flag, statuses); });
}
int MPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                   MPI_Comm comm, MPI_Request* request) {
  return timed(
      [&] { return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request); });
}
int MPI_Ireduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[],
                        MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  return timed([&] {
    return PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, request);
  });
}
}  // extern "C"
