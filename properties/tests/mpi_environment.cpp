// MPI for the tests that build a mesh: a singleton of one rank (no mpirun needed).
#include <gtest/gtest.h>
#include <mpi.h>

namespace {
struct mpi_environment : ::testing::Environment {
  void SetUp() override { MPI_Init(nullptr, nullptr); }
  void TearDown() override { MPI_Finalize(); }
};
[[maybe_unused]] auto* const mpi = ::testing::AddGlobalTestEnvironment(new mpi_environment);
}  // namespace
