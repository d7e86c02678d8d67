// The check program: shardcheck's command line over ScaLAPACK's PDGEMM/PSGEMM. Run it under mpirun
// like `shardcheck` itself: `mpirun -n 4 pblas_check verify --strategy pblas_gemm`.
#include <memory>
#include <shardcheck/cli.hpp>

#include "pblas_gemm.hpp"

int main(int argc, char** argv) {
  shardcheck::par::registry mine;
  mine.add(std::make_unique<mylab::pblas_gemm>());
  return shardcheck::cli_main(argc, argv, std::move(mine));
}
