// The check program: shardcheck's command line over this project's kernel. Run it under mpirun
// like `shardcheck` itself: `mpirun -n 4 raw_check verify --strategy raw_data_parallel`.
#include <memory>
#include <shardcheck/cli.hpp>

#include "raw_data_parallel.hpp"

int main(int argc, char** argv) {
  shardcheck::par::registry mine;
  mine.add(std::make_unique<mylab::raw_data_parallel>());
  return shardcheck::cli_main(argc, argv, std::move(mine));
}
