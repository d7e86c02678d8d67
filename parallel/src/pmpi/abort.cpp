// MPI_Abort of pmpi.hpp: a kernel's (or its library's) abort goes to the handler shardcheck set,
// which says which rank aborted, with which code, in which case, and ends the job with one exit
// code of its own. Part of shardcheck::pmpi.
#include <mpi.h>

#include "shardcheck/parallel/pmpi.hpp"

extern "C" int MPI_Abort(MPI_Comm comm, int errorcode) {
  namespace pmpi = shardcheck::par::pmpi;
  if (pmpi::detail::internal_depth == 0 && pmpi::on_abort != nullptr)
    pmpi::on_abort(comm, errorcode);
  return PMPI_Abort(comm, errorcode);
}
