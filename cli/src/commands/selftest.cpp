#include <mpi.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "commands.hpp"
#include "shardcheck/properties/driver.hpp"
#include "shardcheck/properties/selftest.hpp"

namespace shardcheck::commands {

namespace {

struct selftest_options {
  prop::selftest_options opts;
  double timeout = prop::default_case_timeout;
  std::string check = "auto";  // --check
};

int do_selftest(const catalogue& cat, const prop::selftest_options& o, double timeout,
                const std::string& program) {
  if (o.cases < 1) throw usage_error("--cases must be at least 1");
  check_case_timeout(timeout);
  par::comm world = par::comm::world();
  // The gate is judged at 4 ranks: with fewer, a cell whose defect needs more workers (a 2 × 2
  // mesh, a third stage) cannot fire, and its NOT CAUGHT would say nothing of the properties.
  constexpr int selftest_ranks = 4;
  if (world.size() < selftest_ranks)
    throw usage_error("selftest judges its cells at " + std::to_string(selftest_ranks) +
                      " ranks (mpirun -n " + std::to_string(selftest_ranks) + "); " +
                      std::to_string(world.size()) +
                      " launched, too few for the cells whose defects need more workers");
  prop::driver d(
      world, [&](std::string_view n) { return cat.find(n); }, timeout, program);
  int status = 0;
  if (!d.leader()) {
    d.serve();
  } else {
    status = prop::run_selftest(d, cat.mutants, o, program);
    d.stop();
  }
  std::fflush(stdout);
  MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return status;
}

}  // namespace

runner::command selftest(CLI::App& app, const catalogue& cat, const std::string& program) {
  auto o = std::make_shared<selftest_options>();
  auto* selftest = app.add_subcommand(
      "selftest", "Run the properties against every mutant; exit 0 only if all are caught");
  selftest->add_option("--cases", o->opts.cases, "Cases per mutant at most")->capture_default_str();
  selftest->add_option("--seed", o->opts.seed, "RapidCheck seed")
      ->capture_default_str()
      ->check(runner::unsigned_integer());
  selftest->add_option("--case-timeout", o->timeout, "Watchdog seconds")->capture_default_str();
  selftest
      ->add_option("--check", o->check,
                   "How outputs are judged, as verify --check: auto, reference or projection")
      ->capture_default_str();

  return {
      selftest, [] { return true; },
      [o, &cat, program] {
        try {
          o->opts.check = par::parse_check_method(o->check);
        } catch (const invalid_problem&) {
          throw usage_error("--check '" + o->check + "': expected auto, reference or projection");
        }
        return do_selftest(cat, o->opts, o->timeout, program);
      }};
}

}  // namespace shardcheck::commands
