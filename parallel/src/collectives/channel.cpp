#include "collectives/native.hpp"

#include <climits>
#include "shardcheck/parallel/memory.hpp"

namespace shardcheck::par::native {

namespace {
int as_count(std::int64_t n) {
  if (n < 0 || n > INT_MAX) throw invalid_problem("native collective: count out of range for MPI");
  return static_cast<int>(n);
}
}  // namespace

void channel::exchange(const void* out, std::int64_t n, int to, void* in, std::int64_t m, int from,
                       MPI_Datatype t, std::size_t elem_bytes, int tag) {
  const mem::mpi_heap in_mpi;  // what MPI allocates is its own, not the kernel's
  check_mpi(MPI_Sendrecv(out, as_count(n), t, to, tag, in, as_count(m), t, from, tag, c,
                         MPI_STATUS_IGNORE),
            "MPI_Sendrecv");
  sent += n * static_cast<std::int64_t>(elem_bytes);
  received += m * static_cast<std::int64_t>(elem_bytes);
}

void channel::post(const void* out, std::int64_t n, int to, void* in, std::int64_t m, int from,
                   MPI_Datatype t, std::size_t elem_bytes, int tag, MPI_Request (&reqs)[2]) {
  reqs[0] = reqs[1] = MPI_REQUEST_NULL;
  const mem::mpi_heap in_mpi;
  if (from >= 0) {
    check_mpi(MPI_Irecv(in, as_count(m), t, from, tag, c, &reqs[0]), "MPI_Irecv");
    received += m * static_cast<std::int64_t>(elem_bytes);
  }
  if (to >= 0) {
    check_mpi(MPI_Isend(out, as_count(n), t, to, tag, c, &reqs[1]), "MPI_Isend");
    sent += n * static_cast<std::int64_t>(elem_bytes);
  }
}

}  // namespace shardcheck::par::native
