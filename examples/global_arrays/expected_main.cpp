// The expected failures' program: GA_Dgemm as it is, without the adapter's guards, for the ctest
// entries that show each known defect of Global Arrays 5.8.2 still reproduces (CMakeLists.txt):
//   ga_dgemm.unguarded          takes the cases ga_dgemm declines (a process with no rows, a
//                               dimension above 1024)
//   ga_dgemm.claims_determinism ga_dgemm claiming determinism, which GA does not give
#include <ga.h>
#include <macdecls.h>

#include <memory>
#include <shardcheck/cli.hpp>
#include <stdexcept>

#include "ga_dgemm.hpp"

int main(int argc, char** argv) {
  shardcheck::par::registry known;
  known.add(std::make_unique<mylab::ga_dgemm>("ga_dgemm.unguarded", false, false));
  known.add(std::make_unique<mylab::ga_dgemm>("ga_dgemm.claims_determinism", true, true));
  known.set_process_hooks({[](int&, char**&) {
                             GA_Initialize();
                             if (MA_init(C_DBL, 1 << 20, 1 << 20) == 0)
                               throw std::runtime_error("MA_init failed");
                           },
                           [] { GA_Terminate(); }});
  return shardcheck::cli_main(argc, argv, std::move(known));
}
