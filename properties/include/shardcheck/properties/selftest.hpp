#pragma once
// The selftest: every applicable mutant cell run with all properties on, printed as a matrix of
// operators (rows) × strategies (columns), each cell the properties that caught it.
//
//   F forward  B backward  L ledger  M memory  D determinism  P replicas  R runs
//   -   the operator does not apply to the strategy (its claims never list what it targets)
//   ~   applies, but the fault never acted in any case run (e.g. no started collective)
//   !!  the fault acted and no property failed: a finding (or, for an old mutant, a failure)
//   +x  caught by x only when run with x alone (an old mutant whose property the all-property
//       run's smallest failing case no longer shows, e.g. backward behind forward)
//
// Each cell runs RapidCheck until its first failure, up to `cases` cases (then shrinks it). An
// old mutant whose property the smallest failing case does not show (or that no case failed) is
// run again with that property alone, up to 5·cases cases from the next seed. Exit status 0 only
// if each old mutant's cell (see mutants.hpp) is caught by its property. At 4 ranks on two
// cores the default 100 cases take about 10 s in all (a cell that fails stops at its first
// failure; the ~ cells run all their cases), far inside the four-minute budget.
#include <cstdint>
#include <cstdio>
#include <string>

#include "shardcheck/properties/driver.hpp"
#include "shardcheck/properties/mutants.hpp"

namespace shardcheck::prop {

struct selftest_options {
  int cases = 100;  // per cell, at most
  std::uint64_t seed = 1;
  std::FILE* out = stdout;
  bool progress = false;                                   // a line on stderr per cell
  par::check_method check = par::check_method::automatic;  // every case's (verify --check)
};

// Leader only (the followers serve() meanwhile; the caller stops them afterwards). `program`
// names the executable in replay lines. Returns the exit status: 0 if every old mutant is caught
// by its property, else 1.
int run_selftest(driver& d, const mutant_set& m, const selftest_options& o,
                 const std::string& program);

}  // namespace shardcheck::prop
