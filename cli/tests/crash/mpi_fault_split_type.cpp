// Fault injection from outside: LD_PRELOAD this library and MPI_Comm_split_type fails, as a
// broken MPI runtime would. shardcheck calls it before any case (the ranks on each node, for the
// default memory limit), so the run must end with exit 4 ("MPI error"), not as bad usage. Both
// names fail: a program linking shardcheck::pmpi defines MPI_Comm_split_type itself (the
// profiling layer), which then calls PMPI_Comm_split_type.
#include <mpi.h>

extern "C" int MPI_Comm_split_type(MPI_Comm, int, int, MPI_Info, MPI_Comm*) {
  return MPI_ERR_OTHER;
}
extern "C" int PMPI_Comm_split_type(MPI_Comm, int, int, MPI_Info, MPI_Comm*) {
  return MPI_ERR_OTHER;
}
