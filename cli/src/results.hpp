#pragma once
// What `verify` found, kept for the files a CI system reads: `--junit` (one testcase per strategy ×
// property) and `--json` (the same plus cases, times, error ratios, peak vs bound). Both are
// rewritten whole, through a temporary file renamed over the old one, as each strategy finishes:
// an interrupted run leaves the strategies it finished.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shardcheck/properties/driver.hpp"

namespace shardcheck::results {

// One failing case of a strategy, e.g. {source "corpus", line 3, failed forward, message
// "forward: Y[i=0, j=0] …", case_line "strategy=… p=2 …", replay "mpirun -n 2 … --replay '…'"}.
struct failure_record {
  std::string source;  // "generated" (shrunk by RapidCheck), "corpus" or "replay" (a replay line)
  int line = 0;        // 1-based line of the corpus or replay file; 0 for a generated case
  unsigned failed = 0;
  std::string message;
  std::string case_line;
  std::string replay;
  // The case run `reruns` more times after it failed (verify --reruns): `reproduced` of them
  // failed the same property. `runs`: how many runs it took to fail first (verify --repeat).
  int reruns = 0, reproduced = 0, runs = 1;
  // Some run of the same case passed: a re-run, or a run before the first failure.
  [[nodiscard]] bool intermittent() const { return reproduced < reruns || runs > 1; }
};

struct strategy_result {
  std::string name;
  int cases = 0;     // generated cases run (shrinking steps excluded)
  int replayed = 0;  // cases from the corpus or replay lines
  double seconds = 0;
  double worst_error = 0, worst_memory = 0;
  prop::error_figures errors;      // per dtype, output tensor and mode, with each tier's share
  double projected[2] = {-1, -1};  // blocks judged by projection: each bound's worst share
  std::int64_t peak_bytes = 0, bound_bytes = 0;  // of the case with the worst memory ratio
  std::int64_t recorded_sent = 0;   // the most bytes one rank sent in one case, as recorded
  std::int64_t mpi_peak_bytes = 0;  // the most MPI allocated inside one rank's kernel calls
  unsigned not_claimed = 0, not_measured = 0;
  unsigned judged = 0;  // properties judged on some case (strategy_report::judged)
  // Generated cases the kernel declined (its preconditions), and the reason of the first.
  std::int64_t declined = 0;
  std::string declined_example;
  std::vector<failure_record> failures;
  // A mutant cell that no property caught: "never acted" (its fault never changed anything) or
  // "not caught" (it acted and every property held); empty otherwise. Never a pass.
  std::string survived;
  [[nodiscard]] bool passed() const { return failures.empty(); }
  // Folds one replayed case in (checked for `mask`): counts, worst ratios, what was not claimed
  // or measured, and judged.
  void add(const prop::case_verdict& v, unsigned mask);
};

// What verify --baseline found (baseline.hpp): cases set against the file, cases recorded, and
// each change, a failure when --baseline-fail names its lane.
struct baseline_result {
  std::string file;
  int compared = 0, recorded = 0;
  double growth = 0;
  std::vector<std::string> failing_lanes;
  bool failed = false;  // the run fails for it (exit 1): a failing lane found something
  struct change {
    std::string lane, case_line, what;
    bool failure = false;
  };
  std::vector<change> changes;
};

struct run_results {
  std::string program;
  int ranks = 0;
  int cases_per_strategy = 0;
  std::uint64_t seed = 0;
  int reruns = 0;  // verify --reruns: how many more times a failing case runs
  unsigned mask = prop::all_properties;
  std::string corpus;     // the --corpus file, if any
  bool complete = false;  // false while strategies remain (an interrupted run stays false)
  std::vector<strategy_result> strategies;
  std::optional<baseline_result> baseline;  // with --baseline, once the run is complete
};

// A property's verdict for a strategy: "fail", "not claimed", "not measured", "not selected"
// (left out by --property) or "pass", in that order of precedence.
[[nodiscard]] std::string_view status_of(const strategy_result& r, unsigned mask, unsigned p);

// Text XML 1.0 may carry: valid UTF-8 with no control characters but tab, newline and carriage
// return. An invalid byte or a forbidden control character becomes the text \xNN, U+FFFE and
// U+FFFF the text \u{FFFE}, \u{FFFF}: the bytes 'a' 0x01 'b' 0xFF come out as `a\x01b\xFF`.
[[nodiscard]] std::string xml_safe(std::string_view s);

// The JUnit XML document: one <testsuite> per strategy, one <testcase> per property.
[[nodiscard]] std::string junit_xml(const run_results& r);
// The JSON document; its schema is in docs/outputs.md ("Results a CI system reads").
[[nodiscard]] std::string json_text(const run_results& r);

// Writes `text` to `path` atomically (a temporary file beside it, then rename); a symlink's
// target is the file replaced, and a path that is no regular file (/dev/null, a FIFO) is written
// in place, never replaced. Throws shardcheck::error (a directory, a failed write).
void write_atomically(const std::string& path, std::string_view text);

}  // namespace shardcheck::results
