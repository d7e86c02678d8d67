#include "shardcheck/cli.hpp"

#include <CLI/CLI.hpp>

#include "src/audit.hpp"
#include "src/commands/commands.hpp"
#include "src/compare.hpp"
#include "src/runner.hpp"
#include "src/scale.hpp"

namespace shardcheck {

int cli_main(int argc, char** argv, par::registry extra) {
  const commands::catalogue cat(std::move(extra));
  const std::string program = argc > 0 ? argv[0] : "shardcheck";
  const auto find = [&cat](std::string_view n) { return cat.find(n); };

  CLI::App app{
      "shardcheck: proves that parallel GEMM strategies compute what one device "
      "computes, with the memory and communication they claim."};
  app.footer(
      "Exit codes: 0 all pass, 1 a property failed, 2 bad usage (an option, a case line, a file "
      "that cannot be read or written, nothing to check), 3 the watchdog ended a hung case, 4 an "
      "MPI or runtime error, 5 a rank crashed (shrink the case with `shrink`), 6 a kernel or its "
      "library called MPI_Abort, 7 a mutant no property caught, 129/130/143 "
      "SIGHUP/SIGINT/SIGTERM, 137 a rank was killed (SIGKILL: the OOM killer or a job's time "
      "limit).");
  app.require_subcommand(1);
  std::vector<runner::command> all = {
      commands::list(app, cat), commands::verify(app, cat, program), commands::explain(app, cat),
      commands::selftest(app, cat, program), commands::shrink(app, cat, program)};
  compare::options co;
  audit::options ao;
  scale::options so;
  const auto mpi = [] { return true; };
  all.push_back({compare::add_subcommand(app, co), mpi,
                 [&] { return compare::run(cat.strategies(), find, co); }});
  all.push_back({audit::add_subcommand(app, ao), mpi,
                 [&] { return audit::run(cat.strategies(), find, ao); }});
  all.push_back({scale::add_subcommand(app, so), mpi,
                 [&] { return scale::run(cat.strategies(), find, so); }});
  return runner::run(app, argc, argv, all, cat.extra.hooks());
}

}  // namespace shardcheck
