#include "mpi_environment.hpp"

#include <mpi.h>

#include <cstdlib>

#include "shardcheck/parallel/memory.hpp"

namespace shardcheck::test {

void need_mpi() {
  int started = 0;
  MPI_Initialized(&started);
  if (started != 0) return;
  {
    const mem::mpi_heap in_mpi;  // as par::environment's
    MPI_Init(nullptr, nullptr);
  }
  std::atexit([] {
    int finalised = 0;
    MPI_Finalized(&finalised);
    if (finalised == 0) MPI_Finalize();
  });
}

}  // namespace shardcheck::test
