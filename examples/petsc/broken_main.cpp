// The negative tests' program: the two mis-claiming adapters, each of which `verify` must fail
// (CMakeLists.txt says how). PETSc is set up as in main.cpp.
#include <mpi.h>
#include <petscmat.h>
#include <petscsf.h>
#include <petscvec.h>

#include <memory>
#include <shardcheck/cli.hpp>

#include "broken_variants.hpp"

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  PetscOptionsSetValue(nullptr, "-no_signal_handler", nullptr);
  if (PetscInitializeNoArguments() != 0 || MatInitializePackage() != 0 ||
      VecInitializePackage() != 0 || PetscSFInitializePackage() != 0)
    MPI_Abort(MPI_COMM_WORLD, 3);
  int code = 0;
  {
    shardcheck::par::registry broken;
    broken.add(std::make_unique<mylab::forgets_buffer>());
    broken.add(std::make_unique<mylab::misses_call>());
    code = shardcheck::cli_main(argc, argv, std::move(broken));
  }
  PetscFinalize();
  MPI_Finalize();
  return code;
}
