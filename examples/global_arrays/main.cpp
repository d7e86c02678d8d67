// The check program: shardcheck's command line over Global Arrays' GA_Dgemm/GA_Sgemm. Run it under
// mpirun like `shardcheck` itself: `mpirun -n 4 ga_check verify --strategy ga_dgemm`.
#include <ga.h>
#include <macdecls.h>

#include <memory>
#include <shardcheck/cli.hpp>
#include <stdexcept>

#include "ga_dgemm.hpp"

int main(int argc, char** argv) {
  shardcheck::par::registry mine;
  mine.add(std::make_unique<mylab::ga_dgemm>());
  mine.set_process_hooks({[](int&, char**&) {
                            GA_Initialize();
                            if (MA_init(C_DBL, 1 << 20, 1 << 20) == 0)
                              throw std::runtime_error("MA_init failed");
                          },
                          [] { GA_Terminate(); }});
  return shardcheck::cli_main(argc, argv, std::move(mine));
}
