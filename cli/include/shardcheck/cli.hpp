#pragma once
// The shardcheck program as a library call, so that a project can plug in its own strategies:
//   int main(int argc, char** argv) {
//     shardcheck::par::registry mine;
//     mine.add(std::make_unique<my_kernel>());
//     return shardcheck::cli_main(argc, argv, std::move(mine));
//   }
// `extra` kernels are listed, verified, explained and benchmarked like the built-in ones, and the
// mutants run against them too: `verify --strategy mutant.<operator>@<kernel>`.
#include "shardcheck/parallel/registry.hpp"

namespace shardcheck {

// Exit codes (properties/exit_codes.hpp, README "Exit codes"): 0 all pass, 1 a property failed,
// 2 bad usage (an option, a case line, a file that cannot be read or written, nothing to check),
// 3 the watchdog ended a hung case, 4 an MPI or runtime error, 5 a rank crashed, 6 a kernel or
// its library called MPI_Abort (a program linking shardcheck::pmpi), 7 a mutant no property
// caught, 129/130/143 SIGHUP/SIGINT/SIGTERM, 137 a rank killed (SIGKILL).
int cli_main(int argc, char** argv, par::registry extra = {});

}  // namespace shardcheck
