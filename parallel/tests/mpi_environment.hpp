#pragma once
// MPI for the unit tests that need it: a singleton of one rank (no mpirun needed), started by the
// first test that calls need_mpi() and finalised at exit. Tests that need no MPI never pay for
// starting it (a third of a second per process: ctest runs every test in its own).
namespace shardcheck::test {

void need_mpi();

}  // namespace shardcheck::test
