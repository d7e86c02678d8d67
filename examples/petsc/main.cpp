// The check program: shardcheck's command line over PETSc's MATMPIDENSE products. Run it under
// mpirun like `shardcheck` itself: `mpirun -n 4 petsc_check verify --strategy petsc_dense`.
// PETSc is set up once per process, on MPI initialised here (shardcheck takes MPI as it finds it),
// with PETSc's signal handler off so that a crash reaches shardcheck's report, and its Mat, Vec and
// PetscSF packages registered up front: PETSc registers a package's types on its first use, once
// per process, and that registration is no part of any case's peak.
#include <mpi.h>
#include <petscmat.h>
#include <petscsf.h>
#include <petscvec.h>

#include <memory>
#include <shardcheck/cli.hpp>

#include "petsc_dense.hpp"

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  PetscOptionsSetValue(nullptr, "-no_signal_handler", nullptr);
  if (PetscInitializeNoArguments() != 0 || MatInitializePackage() != 0 ||
      VecInitializePackage() != 0 || PetscSFInitializePackage() != 0)
    MPI_Abort(MPI_COMM_WORLD, 3);
  int code = 0;
  {
    shardcheck::par::registry mine;
    mine.add(std::make_unique<mylab::petsc_dense>());
    code = shardcheck::cli_main(argc, argv, std::move(mine));
  }
  PetscFinalize();
  MPI_Finalize();
  return code;
}
