// MPI for the tests that communicate: a singleton (no mpirun needed), or the ranks of mpirun.
#include <gtest/gtest.h>
#include <mpi.h>

namespace {
struct mpi_environment : ::testing::Environment {
  void SetUp() override { MPI_Init(nullptr, nullptr); }
  void TearDown() override { MPI_Finalize(); }
};
[[maybe_unused]] auto* const mpi = ::testing::AddGlobalTestEnvironment(new mpi_environment);
}  // namespace
