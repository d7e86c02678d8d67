#pragma once
// The property driver across MPI ranks. One mpirun hosts every case: rank 0 (the leader) runs
// RapidCheck; each case it generates, shrinking steps included, is broadcast to every rank as its
// replay line; ranks below the case's p run it on a sub-communicator of that size, the others
// wait; the verdict is reduced back to rank 0, which asserts. A STOP message ends the followers.
// A per-case watchdog ends the whole job, printing the case's replay line, when a case hangs.
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "shardcheck/parallel/comm.hpp"
#include "shardcheck/parallel/kernel.hpp"
#include "shardcheck/properties/generators.hpp"
#include "shardcheck/properties/harness.hpp"

namespace shardcheck::prop {

// How many more times a failing case runs before it is reported (verify --reruns).
inline constexpr int default_reruns = 8;

struct case_verdict;

struct suite_options {
  int cases = 100;
  std::uint64_t seed = 1;
  unsigned mask = all_properties;
  bool progress = true;  // a line on stderr every few seconds on long runs
  case_pins pins;        // what every case fixes (backend, p, parameters, M/N/K); the rest drawn
  // After RapidCheck's shrinking, simplify the failing case one field at a time (shrink.hpp)
  // until no single simplification still fails, in at most shrink_max_runs runs begun within
  // shrink_seconds. The selftest, which asks only whether a cell is caught, turns it off.
  bool local_minimum = true;
  // A drawn case whose footprint on some rank is above this many bytes is discarded, never run
  // (footprint.hpp); generated shapes are small, so only pins can lead there.
  std::int64_t memory_limit = INT64_MAX;
  int shrink_max_runs = 200;
  double shrink_seconds = 60;
  // A failing case runs this many more times before it is reported: "reproduced k of n". When the
  // first failure found reproduces in fewer than all of them (intermittent), every shrinking
  // candidate runs up to 1 + reruns times and is kept if one of its runs fails.
  int reruns = default_reruns;
  // Called on the leader with each drawn case and its verdict (not shrinking's candidates).
  std::function<void(const par::run_case&, const case_verdict&)> on_case{};
};

// The verdict of one case over all ranks.
struct case_verdict {
  unsigned failed = 0;
  unsigned not_claimed = 0;  // properties no rank could judge for want of a claim
  std::string message;       // from the lowest failing rank
  double worst_error = 0, worst_memory = 0;
  error_figures errors;            // the largest of every rank's (harness.hpp)
  double projected[2] = {-1, -1};  // the largest of every rank's (harness.hpp verdict)
  std::int64_t peak_bytes = 0, bound_bytes = 0;
  unsigned not_measured = 0;  // properties some rank could not measure (memory without the hook)
  std::int64_t recorded_sent = 0;   // the most bytes one rank sent, as recorded (verdict)
  std::int64_t mpi_peak_bytes = 0;  // the most MPI allocated inside one rank's kernel calls
  // Leader, when the driver keeps digests (keep_digests) and the case ran everywhere: each
  // output's name and digest (invariance.hpp), in the order Y, dX, dW_1 …
  std::vector<std::string> output_names;
  std::vector<std::uint64_t> digests;
};

struct strategy_report {
  std::string name;
  int cases = 0;  // cases run, shrinking steps excluded
  bool passed = true;
  // Properties not claimed on every case run (so never judged): reported `not claimed`.
  unsigned not_claimed = 0;
  // Properties not measured on some case (memory in a program without shardcheck::new_hook).
  unsigned not_measured = 0;
  // Properties judged on some case run: an opt-in one (invariance) judged anywhere is not
  // reported `not claimed` for the cases that had nothing to vary.
  unsigned judged = 0;
  double seconds = 0;
  case_verdict failure;  // of the smallest failing case
  std::string replay;    // its replay line (the case only)
  // The final pass (suite_options::local_minimum): its runs, not counted in `cases`, and whether
  // it ended at a local minimum (false: it stopped at its budget, or did not run).
  int shrink_runs = 0;
  bool local_minimum = false;
  // The reported case run `reruns` more times (suite_options::reruns): `reproduced` of them
  // failed the property its failure names. Fewer than all: the failure is intermittent.
  int reruns = 0, reproduced = 0;
  double worst_error = 0, worst_memory = 0;
  error_figures errors;                          // over every case run
  double projected[2] = {-1, -1};                // the same for blocks judged by projection
  std::int64_t peak_bytes = 0, bound_bytes = 0;  // of the case with the worst memory ratio
  std::int64_t recorded_sent = 0;                // the most one rank sent in one case
  // Cases drawn that the kernel declined (its preconditions) while `cases` ran, and the reason of
  // the first (kernel.hpp case_declined).
  std::int64_t declined = 0;
  std::string declined_example;
  std::int64_t mpi_peak_bytes = 0;  // the most MPI allocated inside one rank's kernel calls
};

class driver {
 public:
  [[nodiscard]] double case_timeout() const { return timeout_; }
  // Finds what a case line's `strategy=` names: a kernel or a mutant; nullptr if unknown.
  using lookup = std::function<const subject*(std::string_view)>;
  // \note collective over world: builds a sub-communicator for every worker count.
  // `program` is how replay lines name this executable.
  driver(par::comm& world, lookup find, double case_timeout_seconds, std::string program);
  ~driver();
  driver(const driver&) = delete;
  driver& operator=(const driver&) = delete;

  [[nodiscard]] bool leader() const { return world_.rank() == 0; }
  [[nodiscard]] int ranks() const { return world_.size(); }

  // Leader only: runs one case on every rank and returns the reduced verdict.
  case_verdict run(const par::run_case& c, unsigned mask);
  // Leader only: RapidCheck over generated cases for `name` (a kernel or a mutant, found through
  // the lookup), drawn from what s.k supports.
  strategy_report check(const std::string& name, const subject& s, const suite_options& o);
  // The outcome of the final shrinking pass.
  struct shrunk {
    par::run_case c;
    case_verdict v;
    int runs = 0;
    bool local_minimum = false;  // no single simplification of c still fails
  };
  // Leader only: from failing case c (verdict v), moves to the first of simpler(c) that still
  // fails the property v's message names, and repeats, within the budget (runs, seconds) of o;
  // what o pins stays.
  // A candidate runs up to `runs_per_candidate` times and still fails if one of its runs does.
  shrunk minimize(const subject& s, const par::run_case& c, const case_verdict& v,
                  const suite_options& o, int runs_per_candidate = 1);
  // Leader only: c run up to `runs` times, until a run fails a property of `target`: that run's
  // verdict (else the last run's) and the number of runs made.
  struct attempts {
    case_verdict v;
    int runs = 0;
  };
  attempts run_until_failure(const par::run_case& c, unsigned mask, unsigned target, int runs);
  // Leader only: failing case c (verdict v) run n more times: how many of them fail the property
  // v's message names (named_property). Every rank runs each re-run; the leader, which judges
  // the reduced verdicts, alone decides, so every rank follows the same shrinking path.
  int reproduce(const par::run_case& c, unsigned mask, const case_verdict& v, int n);
  // Leader only: from now on, every case line is appended to `path` (and flushed) before the
  // case runs, so a crash or an interrupt leaves it there; the file replays with --replay-file.
  // Throws error when the file cannot be opened.
  void log_cases(const std::string& path);
  // Every rank alike: from now on each case's verdict carries its outputs' digests (baselines).
  void keep_digests() { keep_digests_ = true; }
  // Leader only: ends the followers' serve().
  void stop();
  // Followers: run what the leader sends until STOP.
  void serve();

 private:
  case_verdict execute(const std::string& message);
  // Every rank: case c's outputs (kept) digested and, for a kernel claiming invariance, set
  // against the same case's under each claimed setting; a difference fails `invariance` on the
  // leader. `abandoned` becomes a variant's p when its ranks were out of step.
  void compare_outputs(const subject& s, const par::run_case& c, unsigned mask,
                       const kept_outputs& kept, verdict& mine, case_verdict& out, int& abandoned);
  void finish();
  par::comm& world_;
  lookup find_;
  double timeout_;
  std::string program_;
  std::vector<par::comm> subs_;     // subs_[p-1]: ranks 0..p-1
  std::vector<par::comm> reports_;  // the same ranks, for the flight recorder's reports alone
  par::comm signals_;  // every rank: rank 0's word that a command is sent or a case has ended
  std::uint64_t serial_ = 0;  // cases run, the same on every rank
  struct watchdog;
  std::unique_ptr<watchdog> dog_;
  bool keep_digests_ = false;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> case_log_{nullptr, &std::fclose};
  std::string case_log_path_;
};

// The property a failing verdict's message names ("forward: Y[i=0, …" → forward), which a
// re-run or a simpler case must fail too; every property v failed if the message names none.
[[nodiscard]] unsigned named_property(const case_verdict& v);

// The watchdog's limit on one case, in seconds, unless --case-timeout says otherwise.
inline constexpr double default_case_timeout = 120;
// How this build's MPI launches `ranks` processes, as a replay line starts: Open MPI's
// `mpirun -n 2 --oversubscribe`; MPICH's hydra oversubscribes without a flag: `mpiexec -n 2`.
[[nodiscard]] std::string launch_command(int ranks);
// The command that replays a case, checking the properties in `mask`, under the Open MPI settings
// in force that change collective behaviour: every OMPI_MCA_coll* variable of the environment
// (mpirun --mca coll_tuned_allreduce_algorithm 4 sets OMPI_MCA_coll_tuned_allreduce_algorithm=4
// for its ranks), e.g.
//   mpirun -n 2 --oversubscribe --mca coll_tuned_allreduce_algorithm 4 build/cli/shardcheck verify
//     --replay 'strategy=row_parallel p=2 M=1 N=1 K=2 …'
// and with the other options that decide its verdict: `--property` unless all, `--case-timeout`
// unless the default (a case the watchdog ended at 5 s may pass at 120); and `--repeat R` for an
// intermittent failure (repeat > 1): the replay runs the case up to R times, until it fails.
[[nodiscard]] std::string replay_command(std::string_view program, const par::run_case& c,
                                         unsigned mask = all_properties,
                                         double case_timeout = default_case_timeout,
                                         int repeat = 1);
// How many times the replay of an intermittent failure runs its case, until it fails (--repeat):
// enough that a failure at the rate the re-runs measured, (reproduced + 1) / (reruns + 2), comes
// back with probability 99%; at least 1 + reruns, at most 1000: 3 of 8 → 10 runs, 0 of 8 → 44.
[[nodiscard]] int repeat_for(int reproduced, int reruns);
// The command that shrinks a crashing case in fresh jobs, one per candidate (`shardcheck
// shrink`), launched as a replay of c is, e.g.
//   build/cli/shardcheck shrink --replay 'strategy=… p=4 …' -- mpirun -n 4 --oversubscribe
// with the options of replay_command that decide the verdict.
[[nodiscard]] std::string shrink_command(std::string_view program, const par::run_case& c,
                                         unsigned mask = all_properties,
                                         double case_timeout = default_case_timeout);
// Arguments quoted for a POSIX shell: shell_quoted("a b") == "'a b'", shell_quoted("4") == "4",
// shell_quoted("it's") == "'it'\\''s'".
[[nodiscard]] std::string shell_quoted(std::string_view s);
// (name, value) of every OMPI_MCA_coll* variable of the environment, sorted by name: e.g.
// {"coll_tuned_use_dynamic_rules", "1"} for OMPI_MCA_coll_tuned_use_dynamic_rules=1.
[[nodiscard]] std::vector<std::pair<std::string, std::string>> collective_mca_settings();

}  // namespace shardcheck::prop
