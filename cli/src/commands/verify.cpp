#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "../baseline.hpp"
#include "../corpus.hpp"
#include "../dump.hpp"
#include "../results.hpp"
#include "commands.hpp"
#include "shardcheck/parallel/memory.hpp"
#include "shardcheck/properties/driver.hpp"
#include "shardcheck/properties/exit_codes.hpp"
#include "shardcheck/properties/footprint.hpp"
#include "shardcheck/properties/last_words.hpp"

namespace shardcheck::commands {

namespace {

using prop::human_bytes;

template <class... A>
void appendf(std::string& out, const char* format, A... args) {
  const int n = std::snprintf(nullptr, 0, format, args...);
  if (n <= 0) return;
  const std::size_t at = out.size();
  out.resize(at + static_cast<std::size_t>(n) + 1);
  std::snprintf(out.data() + at, static_cast<std::size_t>(n) + 1, format, args...);
  out.resize(at + static_cast<std::size_t>(n));
}

// A share of a bound: "-" where the tier was not applied (exact mode, bitwise).
std::string share_text(double v) {
  if (v < 0) return "-";
  std::string out;
  appendf(out, "%.2g", v);
  return out;
}

// Under a strategy's row, one line per dtype judged: per output tensor the worst error in
// u·|X||W|ᵀ and, in brackets, the worst share of the rigorous and the statistical bound used, e.g.
//   f32  Y 0.31 [1.2e-05 0.021]  dX 0.25 [8.8e-06 0.017]  dW 0.4 [2.1e-05 0.03]
std::string error_rows(const prop::error_figures& e) {
  std::string out;
  for (std::size_t t = 0; t < prop::error_figures::dtypes; ++t) {
    const auto type = static_cast<dtype>(t);
    std::string line;
    for (const par::tensor x : {par::tensor::y, par::tensor::dx, par::tensor::dw}) {
      const prop::error_cell c = e.over_modes(type, x);
      if (c.err_u_mag < 0) continue;
      appendf(line, "  %s %.3g [%s %s]", std::string(par::to_string(x)).c_str(), c.err_u_mag,
              share_text(c.rigorous).c_str(), share_text(c.statistical).c_str());
    }
    if (!line.empty()) appendf(out, "  %s%s\n", std::string(to_string(type)).c_str(), line.c_str());
  }
  return out;
}

// Under a strategy's row, when blocks were judged by projection (verify --check): the worst share
// of the projection's rigorous and statistical bounds used over every projected row, e.g.
//   projection [0.0013 0.052]
std::string projected_row(const double (&shares)[2]) {
  std::string out;
  if (shares[0] >= 0)
    appendf(out, "  projection [%s %s]\n", share_text(shares[0]).c_str(),
            share_text(shares[1]).c_str());
  return out;
}

// Under a strategy's row, the cases drawn that the kernel declined (its preconditions), e.g.
//   declined: 212 drawn cases, never run (e.g. p=3 is not a perfect square)
std::string declined_line(std::int64_t declined, const std::string& example) {
  std::string out;
  if (declined > 0)
    appendf(out, "  declined: %lld drawn cases, never run (e.g. %s)\n",
            static_cast<long long>(declined), example.c_str());
  return out;
}

// The table's first column fits the longest name (a mutant's is long).
std::string report_row(const prop::strategy_report& r, int width, unsigned mask,
                       const std::string& survived = {}) {
  const auto memory = static_cast<unsigned>(prop::property::memory);
  const std::string peak = (r.not_claimed & memory) != 0 ? "not claimed"
                           : (r.not_measured & memory) != 0
                               ? "not measured"
                               : human_bytes(r.peak_bytes) + " / " + human_bytes(r.bound_bytes);
  std::string out;
  appendf(out, "%-*s %6d  %-4s %8.2f s  %s\n", width, r.name.c_str(), r.cases,
          !r.passed          ? "FAIL"
          : survived.empty() ? "pass"
                             : survived.c_str(),
          r.seconds, peak.c_str());
  out += error_rows(r.errors);
  out += projected_row(r.projected);
  if (const unsigned shown = prop::shown_not_claimed(r.not_claimed, mask); shown != 0)
    appendf(out, "  not claimed (never judged): %s\n", prop::properties_to_string(shown).c_str());
  // What a kernel that claims no collectives really moved, as recorded.
  if ((r.not_claimed & static_cast<unsigned>(prop::property::ledger)) != 0)
    appendf(out, "  recorded: at most %s sent by one rank in one case\n",
            human_bytes(r.recorded_sent).c_str());
  if (r.not_measured != 0)
    appendf(out, "  not measured (never judged): %s\n",
            prop::properties_to_string(r.not_measured).c_str());
  out += declined_line(r.declined, r.declined_example);
  return out;
}

// Said once per run: without shardcheck::new_hook plain new goes uncounted, so `memory` can only
// fail (a peak of matrix buffers alone above the bound), never pass.
void warn_if_unmeasured(unsigned mask) {
  if ((mask & static_cast<unsigned>(prop::property::memory)) == 0 || mem::global_new_tracked())
    return;
  std::printf(
      "shardcheck verify: this program does not link shardcheck::new_hook (link "
      "shardcheck::shardcheck), so allocations through plain new are not counted: memory is "
      "reported not measured\n");
}

// How a failing case came out when run again: `reruns` more runs, `reproduced` of them failing the
// same property, and the `runs` it took to fail first.
struct rerun_tally {
  int reruns = 0, reproduced = 0, runs = 1;
};

// A failing case as the result files keep it: `c` null when RapidCheck could not run at all. An
// intermittent failure's replay line runs the case until it fails, up to as many times as its
// measured rate asks (repeat_for) and at least as many as the run that found it did (`repeat`).
results::failure_record record_of(std::string source, int line, const prop::case_verdict& v,
                                  const par::run_case* c, const std::string& program, unsigned mask,
                                  double case_timeout, rerun_tally t = {}, int repeat = 1) {
  results::failure_record f;
  f.source = std::move(source);
  f.line = line;
  f.failed = v.failed;
  f.message = v.message;
  f.reruns = t.reruns;
  f.reproduced = t.reproduced;
  f.runs = t.runs;
  if (f.failed == 0) f.failed = static_cast<unsigned>(prop::property::runs);
  if (c != nullptr) {
    f.case_line = c->to_string();
    f.replay = prop::replay_command(
        program, *c, mask, case_timeout,
        f.intermittent() ? std::max(repeat, prop::repeat_for(f.reproduced, f.reruns)) : 1);
  }
  return f;
}

// e.g. "FAIL data_parallel: forward: Y[i=0, j=0] … (corpus line 3)", the failing properties, how
// often it reproduced and the replay command.
std::string failure_text(const std::string& name, const results::failure_record& f) {
  std::string out;
  appendf(out, "FAIL %s: %s", name.c_str(), f.message.c_str());
  if (f.line > 0) appendf(out, " (%s line %d)", f.source.c_str(), f.line);
  out += "\n";
  const unsigned runs = static_cast<unsigned>(prop::property::runs);
  std::string failing = prop::properties_to_string(f.failed);
  if ((f.failed & runs) != 0 && f.failed != runs) failing = "runs," + failing;
  appendf(out, "  failing properties: %s\n", failing.c_str());
  if (f.runs > 1) appendf(out, "  first failed on run %d of the case\n", f.runs);
  if (f.reruns > 0 || f.runs > 1)
    appendf(out, "  reproduced %d of %d re-runs%s\n", f.reproduced, f.reruns,
            f.intermittent() ? ": intermittent (some runs of the same case pass)" : "");
  if (!f.replay.empty()) appendf(out, "  replay: %s\n", f.replay.c_str());
  return out;
}

std::string table_header(int width) {
  std::string out;
  appendf(out, "%-*s cases  result     time  measured peak / bound\n", width + 1, "strategy");
  appendf(out, "  dtype  tensor err/u·|X||W|ᵀ [share of the rigorous bound, of the statistical]\n");
  return out;
}

// The table of the strategies finished so far, then their failures.
std::string suite_table(const results::run_results& rr) {
  int width = 28;
  for (const auto& r : rr.strategies) width = std::max(width, static_cast<int>(r.name.size()));
  std::string out = table_header(width);
  for (const auto& res : rr.strategies) {
    prop::strategy_report r;
    r.name = res.name;
    r.cases = res.cases;
    r.passed = res.passed();
    r.not_claimed = res.not_claimed & ~(res.judged & prop::opt_in_properties);
    r.not_measured = res.not_measured;
    r.seconds = res.seconds;
    r.worst_error = res.worst_error;
    r.errors = res.errors;
    r.projected[0] = res.projected[0];
    r.projected[1] = res.projected[1];
    r.peak_bytes = res.peak_bytes;
    r.recorded_sent = res.recorded_sent;
    r.bound_bytes = res.bound_bytes;
    r.declined = res.declined;
    r.declined_example = res.declined_example;
    out += report_row(r, width, rr.mask, res.survived);
    if (res.survived == "never acted")
      appendf(out, "  mutant never acted: its fault found nothing to change in any case\n");
    else if (!res.survived.empty())
      appendf(out, "  mutant not caught: its fault acted and every judged property held\n");
  }
  return out;
}

std::string failures_text(const results::run_results& rr) {
  std::string out;
  for (const auto& r : rr.strategies)
    for (const auto& f : r.failures) out += failure_text(r.name, f);
  return out;
}

struct verify_options {
  std::vector<std::string> strategies;
  int cases = 200;
  std::uint64_t seed = 1;
  std::string replay;
  std::string properties = "all";
  double case_timeout = prop::default_case_timeout;
  bool quiet = false;
  std::string backend;                // empty: drawn per case
  std::string check = "auto";         // how outputs are judged: auto, reference, projection
  int p = 0;                          // 0: drawn per case
  std::vector<std::string> params;    // name=value, pinned
  std::string m_pin, n_pin, k_pin;    // --M, --N, --K: V or LO..HI; empty: drawn
  std::string replay_file;            // replay lines, one a line ("-": stdin)
  std::string corpus;                 // replayed first, then new shrunk failures appended
  std::string junit, json;            // result files, rewritten as each strategy finishes
  std::string memory_limit_text;      // bytes per rank, e.g. "2GiB"; empty: default_memory_limit
  std::string log_cases;              // every case line appended before it runs
  std::string dump;                   // with --replay: the case's values as .npy files here
  int reruns = prop::default_reruns;  // a failing case runs this many more times
  int repeat = 1;                     // a replayed case runs up to this many times, until it fails
  std::string baseline;               // each case's digests and shares, kept and compared
  std::string baseline_fail;          // lanes that fail the run: drift, growth
  double baseline_growth = 2;         // a share grown past this factor is `growth`
  bool baseline_update = false;       // rewrite the file with this run's values
};

// (name, kernel) of each strategy to check; a name may be a mutant's. Default: every strategy;
// with a backend pinned, those that issue no collective (the backend runs nothing of theirs) are
// left out.
std::vector<std::pair<std::string, const par::kernel*>> chosen_strategies(const catalogue& cat,
                                                                          const verify_options& o,
                                                                          bool backend_pinned) {
  std::vector<std::pair<std::string, const par::kernel*>> chosen;
  for (const auto& name : o.strategies) chosen.emplace_back(name, &cat.need(name));
  if (chosen.empty())
    for (const auto* s : cat.normal())
      if (!backend_pinned || s->info().uses_collectives) chosen.emplace_back(s->name(), s);
  return chosen;
}

// --param name=value pins, each a parameter of some chosen strategy.
std::map<std::string, std::int64_t> parse_pins(
    const verify_options& o,
    const std::vector<std::pair<std::string, const par::kernel*>>& chosen) {
  std::map<std::string, std::int64_t> pinned;
  for (const std::string& kv : o.params) {
    const auto [name, value] = parse_param(kv, "--param");
    bool known = false;
    for (const auto& [n, s] : chosen)
      for (const auto& ps : s->info().params) known = known || ps.name == name;
    if (!known) throw usage_error("--param " + name + ": no chosen strategy has that parameter");
    if (!pinned.emplace(name, value).second) throw usage_error("--param " + name + " given twice");
  }
  return pinned;
}

// --M, --N, --K: a value V or a range LO..HI of non-negative integers, LO ≤ HI.
std::optional<prop::dim_range> parse_dim(const std::string& text, const char* flag) {
  if (text.empty()) return std::nullopt;
  const auto number = [&](std::string_view t) {
    std::int64_t v = -1;
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (ec != std::errc{} || end != t.data() + t.size() || v < 0 || v == INT64_MAX)
      throw usage_error(std::string(flag) + " '" + text +
                        "': a non-negative integer V or a range LO..HI");
    return v;
  };
  const std::size_t dots = text.find("..");
  const std::string_view all(text);
  const prop::dim_range r =
      dots == std::string::npos
          ? prop::dim_range{number(all), number(all)}
          : prop::dim_range{number(all.substr(0, dots)), number(all.substr(dots + 2))};
  if (r.lo > r.hi) throw usage_error(std::string(flag) + " '" + text + "': LO is above HI");
  return r;
}

// --M, --N, --K as the generators' pins.
prop::case_pins shape_pins(const verify_options& o) {
  prop::case_pins pins;
  pins.m = parse_dim(o.m_pin, "--M");
  pins.n = parse_dim(o.n_pin, "--N");
  pins.k = parse_dim(o.k_pin, "--K");
  return pins;
}

// Every chosen strategy must take the pins: a worker count its pinned mesh factors divide, and
// values its validation accepts (checked on a small probe case).
void check_pins(const std::vector<std::pair<std::string, const par::kernel*>>& chosen,
                const std::map<std::string, std::int64_t>& pinned, const prop::case_pins& shape,
                int p, int ranks, std::int64_t limit, unsigned mask) {
  for (const auto& [n, s] : chosen) {
    const par::kernel_info& info = s->info();
    par::run_case probe;
    probe.strategy = n;
    probe.prob.M = shape.m ? shape.m->lo : 1;
    probe.prob.N = shape.n ? shape.n->lo : 1;
    probe.prob.K = shape.k ? shape.k->lo : 1;
    const bool pinned_shape = shape.m || shape.n || shape.k;
    probe.prob.type = info.dtypes.front();
    probe.prob.layout = info.layouts.front();
    // A pinned shape is probed in uniform mode: exact mode may round there, and is then not drawn.
    probe.mode = pinned_shape && info.supports(value_mode::uniform) ? value_mode::uniform
                                                                    : info.modes.front();
    for (std::size_t l = 1; l < info.min_layers; ++l) probe.prob.hidden.push_back(1);
    // The product of the pinned mesh factors, each and all capped at max_parts + 1 (dp=65536
    // tp=65536 needs "more than 1048576" workers, never a wrapped int).
    const std::int64_t cap = std::int64_t{par::max_parts} + 1;
    std::int64_t step = 1;
    for (const auto& ps : info.params)
      if (const auto it = pinned.find(ps.name); it != pinned.end()) {
        probe.params[ps.name] = it->second;
        if (ps.divides_p) step = std::min(step * std::clamp<std::int64_t>(it->second, 1, cap), cap);
      }
    probe.p = p > 0 ? p : static_cast<int>(step);
    if (probe.p > ranks)
      throw usage_error(n + ": the pinned parameters need " +
                        (step == cap && p <= 0 ? "more than " + std::to_string(par::max_parts)
                                               : "p=" + std::to_string(probe.p)) +
                        " workers; only " + std::to_string(ranks) + " ranks were launched");
    // The top of a pinned range must be a valid case too; it may be above the memory limit
    // (such draws are refused as they come).
    if (pinned_shape) {
      par::run_case top = probe;
      top.prob.M = shape.m ? shape.m->hi : 1;
      top.prob.N = shape.n ? shape.n->hi : 1;
      top.prob.K = shape.k ? shape.k->hi : 1;
      try {
        par::complete_and_validate(*s, top);
      } catch (const par::case_declined&) {
      }
    }
    try {
      par::complete_and_validate(*s, probe);
    } catch (const par::case_declined&) {
      continue;  // the pins hold (declining comes last); the generators draw what it takes
    }
    try {
      prop::check_footprint(*s, probe, limit, mask);
    } catch (const error& e) {
      throw usage_error("--memory-limit is below the smallest case (M = " +
                        std::to_string(probe.prob.M) + ", N = " + std::to_string(probe.prob.N) +
                        ", K = " + std::to_string(probe.prob.K) + "): " + e.what());
    }
  }
}

// Leader: one replayed case's verdict printed; returns its failure record, if it failed.
std::optional<results::failure_record> print_case_verdict(const par::run_case& c,
                                                          const prop::case_verdict& v, int line,
                                                          unsigned mask, const std::string& program,
                                                          double case_timeout, rerun_tally t,
                                                          int repeat) {
  std::printf("case: %s\n", c.to_string().c_str());
  if (v.failed == 0) {
    std::printf("PASS (%s; worst error %.2f·u·mag, peak %s / bound %s)\n",
                prop::properties_to_string(mask & ~v.not_claimed & ~v.not_measured).c_str(),
                v.worst_error, human_bytes(v.peak_bytes).c_str(),
                human_bytes(v.bound_bytes).c_str());
    std::fputs(error_rows(v.errors).c_str(), stdout);
    std::fputs(projected_row(v.projected).c_str(), stdout);
    if (const unsigned shown = prop::shown_not_claimed(v.not_claimed, mask); shown != 0)
      std::printf("not claimed (never judged): %s\n", prop::properties_to_string(shown).c_str());
    if ((v.not_claimed & static_cast<unsigned>(prop::property::ledger)) != 0)
      std::printf("recorded: at most %s sent by one rank\n", human_bytes(v.recorded_sent).c_str());
    if (v.mpi_peak_bytes > 0)
      std::printf(
          "MPI's own heap inside the kernel's calls: at most %s on one rank (not in the "
          "peak)\n",
          human_bytes(v.mpi_peak_bytes).c_str());
    if (v.not_measured != 0)
      std::printf("not measured (never judged): %s\n",
                  prop::properties_to_string(v.not_measured).c_str());
    return std::nullopt;
  }
  results::failure_record f =
      record_of("replay", line, v, &c, program, mask, case_timeout, t, repeat);
  std::fputs(failure_text(c.strategy, f).c_str(), stdout);
  return f;
}

using chosen_list = std::vector<std::pair<std::string, const par::kernel*>>;

// One case to replay, for one strategy: from a corpus or replay file (its line) or --replay
// (line 0).
struct planned_case {
  par::run_case c;
  int line = 0;
  // The case as its line wrote it (strategy set), before defaults, partitions and the library's
  // choices are filled in: what --baseline keys it by, so that a later version of the kernel
  // with another default or split still meets the same record.
  std::string written;
};

struct replay_plan {
  std::vector<planned_case> cases;   // in file order
  std::vector<std::string> skipped;  // e.g. "corpus.txt:4: needs p=4 workers; 2 ranks launched"
  std::set<std::string> known;       // every line as written and as completed, for --corpus
};

// A corpus line runs on every kernel under test it names (a mutant cell's line also on its
// kernel: corpus::base_kernel); a replay-file line runs on the strategy it names. A line without
// strategy= runs on every kernel under test that takes the case. Malformed lines, and cases a
// named kernel rejects, are bad usage; a case needing more workers than launched is skipped.
replay_plan plan_replays(const catalogue& cat, const std::vector<corpus::line>& lines,
                         const std::string& where, const chosen_list& chosen, bool corpus_mode,
                         int ranks, std::int64_t limit, unsigned mask) {
  replay_plan plan;
  for (const corpus::line& l : lines) {
    const std::string at = where + ":" + std::to_string(l.number);
    plan.known.insert(l.text);
    const bool named = corpus::names_strategy(l.text);
    par::run_case parsed;
    try {
      parsed = par::run_case::parse(named ? l.text : "strategy=? " + l.text);
    } catch (const error& e) {
      throw usage_error(at + ": " + e.what());
    }
    std::vector<std::string> targets;
    if (named && !corpus_mode) targets.push_back(parsed.strategy);
    for (const auto& [n, k] : chosen)
      if (!named || (corpus_mode && corpus::base_kernel(parsed.strategy) == n) ||
          (corpus_mode && parsed.strategy == n))
        targets.push_back(n);
    bool taken = false;
    for (const std::string& t : targets) {
      par::run_case c = parsed;
      c.strategy = t;
      const std::string written = c.to_string();
      try {
        par::complete_and_validate(cat.need(t), c);
      } catch (const par::case_declined& e) {
        // A replay-file line names what it runs: refused. A corpus line is skipped.
        if (named && !corpus_mode) throw usage_error(at + ": " + e.what());
        plan.skipped.push_back(at + ": " + e.what());
        taken = true;
        continue;
      } catch (const error& e) {
        if (named) throw usage_error(at + ": " + e.what());
        continue;  // a case this kernel does not take
      }
      taken = true;
      plan.known.insert(c.to_string());
      if (c.p > ranks) {
        plan.skipped.push_back(at + ": " + t + " needs p=" + std::to_string(c.p) + " workers; " +
                               std::to_string(ranks) + " ranks launched");
        continue;
      }
      try {
        prop::check_footprint(cat.need(t), c, limit, mask);
      } catch (const error& e) {
        plan.skipped.push_back(at + ": " + e.what());
        continue;
      }
      plan.cases.push_back({std::move(c), l.number, written});
    }
    if (!taken)
      plan.skipped.push_back(at + (named ? ": " + parsed.strategy + " is not under test"
                                         : ": no kernel under test takes this case"));
  }
  return plan;
}

results::run_results new_run(const verify_options& o, unsigned mask, int ranks,
                             const std::string& program) {
  results::run_results r;
  r.program = program;
  r.ranks = ranks;
  r.cases_per_strategy = o.replay.empty() && o.replay_file.empty() ? o.cases : 0;
  r.seed = o.seed;
  r.reruns = o.reruns;
  r.mask = mask;
  r.corpus = o.corpus;
  return r;
}

void write_results(const verify_options& o, const results::run_results& r) {
  if (!o.junit.empty()) results::write_atomically(o.junit, results::junit_xml(r));
  if (!o.json.empty()) results::write_atomically(o.json, results::json_text(r));
}

// Leader: the results files rewritten; false (the error printed) if they could not be.
bool try_write_results(const verify_options& o, const results::run_results& r) {
  try {
    write_results(o, r);
    return true;
  } catch (const error& e) {
    std::fprintf(stderr, "shardcheck: %s\n", e.what());
    return false;
  }
}

// Leader: while `name` runs (its results so far in `pending`, if not yet in rr), a kernel's
// MPI_Abort on this rank writes the results files with the running case as aborted (last_words).
void write_on_abort(const verify_options& o, const results::run_results& rr, std::string name,
                    const results::strategy_result* pending) {
  prop::last_words::on_abort([&o, &rr, name = std::move(name), pending](const std::string& what,
                                                                        const std::string& replay) {
    results::run_results copy = rr;
    if (pending != nullptr) copy.strategies.push_back(*pending);
    auto it = std::find_if(copy.strategies.begin(), copy.strategies.end(),
                           [&](const results::strategy_result& r) { return r.name == name; });
    if (it == copy.strategies.end()) {
      copy.strategies.emplace_back().name = name;
      it = std::prev(copy.strategies.end());
    }
    results::failure_record f;
    f.source = "aborted";
    f.failed = static_cast<unsigned>(prop::property::runs);
    f.message = "runs: " + what;
    f.replay = replay;
    const std::string::size_type at = replay.find("--replay '");
    if (at != std::string::npos) {
      const std::string::size_type from = at + 10, to = replay.find('\'', from);
      f.case_line = replay.substr(from, to == std::string::npos ? to : to - from);
    }
    it->failures.push_back(std::move(f));
    write_results(o, copy);
  });
}

// A replayed case's verdict: run up to --repeat times, until it fails; a failure then run
// --reruns more times.
struct replay_outcome {
  prop::case_verdict v;
  rerun_tally tally;
};
replay_outcome replay_case(prop::driver& d, const par::run_case& c, unsigned mask,
                           const verify_options& o) {
  const prop::driver::attempts a = d.run_until_failure(c, mask, ~0U, o.repeat);
  replay_outcome out{a.v, {0, 0, a.runs}};
  if (a.v.failed != 0 && o.reruns > 0) {
    out.tally.reruns = o.reruns;
    out.tally.reproduced = d.reproduce(c, mask, a.v, o.reruns);
  }
  return out;
}

// Leader: every planned case, its verdict printed. Returns the exit status.
// With --baseline: the book's findings into the results, its file written, its summary printed.
// Returns false when the file could not be written.
bool close_baseline(baseline::book* book, results::run_results& rr) {
  if (book == nullptr) return true;
  bool written = true;
  try {
    book->save();
  } catch (const error& e) {
    std::fprintf(stderr, "shardcheck: --baseline: %s\n", e.what());
    written = false;
  }
  results::baseline_result b;
  b.file = book->path();
  b.compared = book->compared();
  b.recorded = book->recorded();
  b.growth = book->growth();
  for (const char* lane : {"drift", "growth"})
    if (book->fails(lane)) b.failing_lanes.emplace_back(lane);
  for (const baseline::finding& f : book->findings())
    b.changes.push_back({f.lane, f.case_line, f.what, book->fails(f.lane)});
  b.failed = book->failed();
  rr.baseline = std::move(b);
  return written;
}

int run_replays(prop::driver& d, const replay_plan& plan, const verify_options& o, unsigned mask,
                const std::string& program, baseline::book* book) {
  using clock = std::chrono::steady_clock;
  warn_if_unmeasured(mask);
  results::run_results rr = new_run(o, mask, d.ranks(), program);
  bool written = true;
  int status = 0, failed = 0;
  std::size_t done = 0;
  for (const planned_case& pc : plan.cases) {
    const auto start = clock::now();
    write_on_abort(o, rr, pc.c.strategy, nullptr);
    const replay_outcome r = replay_case(d, pc.c, mask, o);
    const prop::case_verdict& v = r.v;
    if (book != nullptr) book->observe(pc.written, pc.c, v);
    auto it =
        std::find_if(rr.strategies.begin(), rr.strategies.end(),
                     [&](const results::strategy_result& r) { return r.name == pc.c.strategy; });
    if (it == rr.strategies.end()) {
      rr.strategies.emplace_back().name = pc.c.strategy;
      it = std::prev(rr.strategies.end());
    }
    it->add(v, mask);
    it->seconds += std::chrono::duration<double>(clock::now() - start).count();
    ++done;
    prop::last_words::finished(std::to_string(done) + " of " + std::to_string(plan.cases.size()) +
                               " cases finished (their verdicts are above)\n");
    if (auto f = print_case_verdict(pc.c, v, pc.line, mask, program, d.case_timeout(), r.tally,
                                    o.repeat)) {
      it->failures.push_back(std::move(*f));
      status = 1;
      ++failed;
    }
    written = try_write_results(o, rr) && written;
  }
  prop::last_words::on_abort({});
  d.stop();
  rr.complete = true;
  written = close_baseline(book, rr) && written;
  written = try_write_results(o, rr) && written;
  for (const std::string& why : plan.skipped) std::printf("skipped %s\n", why.c_str());
  if (book != nullptr) std::fputs(book->summary().c_str(), stdout);
  if (book != nullptr && book->failed() && status == 0) status = prop::exit_code::failed;
  if (!o.replay_file.empty())
    std::printf("%zu passed, %d failed\n", plan.cases.size() - static_cast<std::size_t>(failed),
                failed);
  return written ? status : 2;
}

// Leader: for every chosen strategy the corpus cases that apply to it, then RapidCheck; then the
// table. New shrunk failures are appended to the corpus. Returns the exit status.
int run_suite(prop::driver& d, const catalogue& cat, const chosen_list& chosen,
              const prop::suite_options& so, const std::string& program, const verify_options& o,
              replay_plan corpus_plan, baseline::book* book) {
  using clock = std::chrono::steady_clock;
  // The check method, when not auto.
  const std::string check = so.pins.check == par::check_method::automatic
                                ? std::string()
                                : ", check " + std::string(par::to_string(so.pins.check));
  std::printf("shardcheck verify: %d ranks, %d cases per strategy, seed %llu, properties %s%s\n",
              d.ranks(), so.cases, static_cast<unsigned long long>(so.seed),
              prop::properties_to_string(so.mask).c_str(), check.c_str());
  warn_if_unmeasured(so.mask);
  int status = 0;
  bool written = true;
  results::run_results rr = new_run(o, so.mask, d.ranks(), program);
  std::vector<std::string> appended;
  int replayed = 0, replay_failed = 0;
  for (const auto& [n, s] : chosen) {
    results::strategy_result res;
    res.name = n;
    write_on_abort(o, rr, n, &res);
    const prop::mutant_cell* cell = cat.cell(n);
    const std::int64_t fired = cell != nullptr ? cell->fire_count() : 0;
    const auto start = clock::now();
    for (const planned_case& pc : corpus_plan.cases) {
      if (pc.c.strategy != n) continue;
      const replay_outcome r = replay_case(d, pc.c, so.mask, o);
      if (book != nullptr) book->observe(pc.written, pc.c, r.v);
      res.add(r.v, so.mask);
      ++replayed;
      if (r.v.failed != 0) {
        res.failures.push_back(record_of("corpus", pc.line, r.v, &pc.c, program, so.mask,
                                         d.case_timeout(), r.tally, o.repeat));
        ++replay_failed;
      }
    }
    res.seconds = std::chrono::duration<double>(clock::now() - start).count();
    const prop::strategy_report r = d.check(n, *cat.find(n), so);
    res.cases = r.cases;
    res.seconds += r.seconds;
    res.worst_error = std::max(res.worst_error, r.worst_error);
    res.errors.merge(r.errors);
    for (int k = 0; k < 2; ++k) res.projected[k] = std::max(res.projected[k], r.projected[k]);
    res.recorded_sent = std::max(res.recorded_sent, r.recorded_sent);
    res.mpi_peak_bytes = std::max(res.mpi_peak_bytes, r.mpi_peak_bytes);
    if (r.worst_memory >= res.worst_memory) {
      res.worst_memory = r.worst_memory;
      res.peak_bytes = r.peak_bytes;
      res.bound_bytes = r.bound_bytes;
    }
    res.not_claimed |= r.not_claimed;
    res.not_measured |= r.not_measured;
    res.judged |= r.judged;
    res.declined = r.declined;
    res.declined_example = r.declined_example;
    if (!r.passed) {
      std::optional<par::run_case> c;
      if (!r.replay.empty()) c = par::run_case::parse(r.replay);
      res.failures.push_back(record_of("generated", 0, r.failure, c ? &*c : nullptr, program,
                                       so.mask, d.case_timeout(), {r.reruns, r.reproduced, 1}));
      if (!o.corpus.empty() && c && corpus_plan.known.insert(r.replay).second) {
        try {
          corpus::append(o.corpus, {r.replay});
          appended.push_back(r.replay);
        } catch (const error& e) {
          std::fprintf(stderr, "shardcheck: %s\n", e.what());
          written = false;
        }
      }
    }
    if (!res.passed()) status = prop::exit_code::failed;
    if (cell != nullptr && res.passed()) {
      res.survived = cell->fire_count() > fired ? "not caught" : "never acted";
      if (status == 0) status = prop::exit_code::not_caught;
    }
    rr.strategies.push_back(std::move(res));
    written = try_write_results(o, rr) && written;
    prop::last_words::finished(suite_table(rr) + failures_text(rr) +
                               std::to_string(rr.strategies.size()) + " of " +
                               std::to_string(chosen.size()) + " strategies finished\n");
  }
  prop::last_words::on_abort({});
  d.stop();
  rr.complete = true;
  written = close_baseline(book, rr) && written;
  written = try_write_results(o, rr) && written;
  std::fputs(suite_table(rr).c_str(), stdout);
  int passed = 0, survived = 0;
  for (const auto& res : rr.strategies) {
    passed += res.passed() && res.survived.empty() ? 1 : 0;
    survived += res.passed() && !res.survived.empty() ? 1 : 0;
  }
  if (!o.corpus.empty()) {
    std::printf("corpus %s: %d cases replayed, %d failed; %zu new failures appended\n",
                o.corpus.c_str(), replayed, replay_failed, appended.size());
    for (const std::string& why : corpus_plan.skipped) std::printf("  skipped %s\n", why.c_str());
  }
  std::fputs(failures_text(rr).c_str(), stdout);
  if (book != nullptr) std::fputs(book->summary().c_str(), stdout);
  if (book != nullptr && book->failed() && status == 0) status = prop::exit_code::failed;
  std::printf("%d passed, %zu failed", passed,
              rr.strategies.size() - static_cast<std::size_t>(passed + survived));
  if (survived > 0)
    std::printf(", %d mutants not caught (exit %d)", survived, prop::exit_code::not_caught);
  std::printf("\n");
  return written ? status : 2;
}

int lead_verify(prop::driver& d, const catalogue& cat, const chosen_list& chosen, replay_plan& plan,
                const verify_options& o, unsigned mask, std::optional<par::backend_spec> forced,
                const std::map<std::string, std::int64_t>& pinned, std::int64_t limit,
                const std::string& program, baseline::book* book);

// No two of the files a run writes (and the corpus it reads and extends) may be one file.
void check_distinct_files(const verify_options& o) {
  namespace fs = std::filesystem;
  std::vector<std::pair<std::string, fs::path>> seen;
  for (const auto& [option, path] :
       {std::pair{"--junit", &o.junit}, std::pair{"--json", &o.json},
        std::pair{"--corpus", &o.corpus}, std::pair{"--log-cases", &o.log_cases},
        std::pair{"--baseline", &o.baseline}}) {
    if (path->empty()) continue;
    std::error_code ec;
    const fs::path p = fs::weakly_canonical(fs::absolute(*path, ec), ec);
    for (const auto& [other, q] : seen)
      if (p == q)
        throw usage_error(std::string(option) + " and " + other + " name one file, " + *path);
    seen.emplace_back(option, p);
  }
}

int do_verify(const catalogue& cat, const verify_options& o, const std::string& program) {
  if (o.cases < 1) throw usage_error("--cases must be at least 1");
  if (o.repeat > 1 && o.replay.empty() && o.replay_file.empty() && o.corpus.empty())
    throw usage_error("--repeat runs replayed cases: it needs --replay, --replay-file or --corpus");
  check_distinct_files(o);
  check_case_timeout(o.case_timeout);
  const unsigned mask = prop::parse_properties(o.properties);
  std::optional<par::backend_spec> forced;
  if (!o.backend.empty()) forced = par::parse_backend_spec(o.backend);
  try {
    (void)par::parse_check_method(o.check);
  } catch (const invalid_problem&) {
    throw usage_error("--check '" + o.check + "': expected auto, reference or projection");
  }
  const auto chosen = chosen_strategies(cat, o, forced.has_value());
  par::comm world = par::comm::world();
  const std::int64_t limit = runner::memory_limit(o.memory_limit_text);
  par::run_case replay_case;
  if (!o.replay.empty()) {
    replay_case = par::run_case::parse(o.replay);
    const par::kernel& k = cat.need(replay_case.strategy);
    if (replay_case.p > world.size())
      throw usage_error("the case needs p=" + std::to_string(replay_case.p) + " workers; only " +
                        std::to_string(world.size()) + " ranks were launched (mpirun -n " +
                        std::to_string(replay_case.p) + ")");
    par::complete_and_validate(k, replay_case);
    prop::check_footprint(k, replay_case, limit, mask);
    if (!o.dump.empty()) dump::check_dumpable(replay_case);
  }
  const std::map<std::string, std::int64_t> pinned = parse_pins(o, chosen);
  if (o.p < 0 || o.p > world.size())
    throw usage_error("--p " + std::to_string(o.p) + ": between 1 and the " +
                      std::to_string(world.size()) + " ranks launched");
  check_pins(chosen, pinned, shape_pins(o), o.p, world.size(), limit, mask);
  // The leader reads the replay lines (stdin reaches rank 0 only) and tries the result files;
  // every rank learns whether that went well.
  if (o.baseline.empty() && (!o.baseline_fail.empty() || o.baseline_update))
    throw usage_error("--baseline-fail and --baseline-update need --baseline FILE");
  if (o.baseline_update && !o.baseline_fail.empty())
    throw usage_error(
        "--baseline-update takes this run's values as the baseline: it goes without "
        "--baseline-fail");
  replay_plan plan;
  std::string plan_error;
  std::optional<baseline::book> book;
  if (world.rank() == 0) {
    try {
      if (!o.baseline.empty())
        book.emplace(o.baseline, o.baseline_growth, o.baseline_fail, o.baseline_update);
      if (!o.replay.empty())
        plan.cases.push_back({replay_case, 0, par::run_case::parse(o.replay).to_string()});
      if (!o.replay_file.empty())
        plan = plan_replays(cat, corpus::read_lines(o.replay_file, false),
                            o.replay_file == "-" ? "stdin" : o.replay_file, chosen, false,
                            world.size(), limit, mask);
      // A file of cases none of which runs here judges nothing: that is no pass.
      if (!o.replay_file.empty() && plan.cases.empty()) {
        std::string why;
        for (const std::string& x : plan.skipped) why += (why.empty() ? "" : "; ") + x;
        runner::nothing_checked("no case of " + o.replay_file + " runs here" +
                                (why.empty() ? std::string(" (it has none)") : ": " + why));
      }
      if (!o.corpus.empty())
        plan = plan_replays(cat, corpus::read_lines(o.corpus, true), o.corpus, chosen, true,
                            world.size(), limit, mask);
      write_results(o, new_run(o, mask, world.size(), program));
      for (const auto& [option, path] :
           {std::pair{"--log-cases", &o.log_cases}, std::pair{"--corpus", &o.corpus}}) {
        if (path->empty()) continue;
        std::FILE* f = std::fopen(path->c_str(), "a");
        if (f == nullptr)
          throw usage_error(std::string(option) + ": cannot open " + *path +
                            " for appending: " + std::strerror(errno));
        std::fclose(f);
      }
    } catch (const error& e) {
      plan_error = e.what();
    }
  }
  int bad = plan_error.empty() ? 0 : 1;
  MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (bad != 0) throw usage_error(plan_error);
  prop::driver d(
      world, [&](std::string_view n) { return cat.find(n); }, o.case_timeout, program);
  if (!o.baseline.empty()) d.keep_digests();
  int status = 0;
  if (!d.leader()) {
    d.serve();
  } else {
    // The followers wait in serve(): an error here ends the job (exit 4) rather than leave them.
    try {
      if (!o.log_cases.empty()) d.log_cases(o.log_cases);
      status = lead_verify(d, cat, chosen, plan, o, mask, forced, pinned, limit, program,
                           book ? &*book : nullptr);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "shardcheck: runtime error: %s\n", e.what());
      std::fflush(stdout);
      std::fflush(stderr);
      PMPI_Abort(MPI_COMM_WORLD, prop::exit_code::runtime);  // not a kernel's (pmpi.hpp)
    }
  }
  std::fflush(stdout);
  MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!o.dump.empty())
    dump::write_case(*cat.find(replay_case.strategy), replay_case, world, o.dump);
  return status;
}

int lead_verify(prop::driver& d, const catalogue& cat, const chosen_list& chosen, replay_plan& plan,
                const verify_options& o, unsigned mask, std::optional<par::backend_spec> forced,
                const std::map<std::string, std::int64_t>& pinned, std::int64_t limit,
                const std::string& program, baseline::book* book) {
  int status = 0;
  if (!o.replay.empty() || !o.replay_file.empty()) {
    status = run_replays(d, plan, o, mask, program, book);
  } else {
    prop::suite_options so;
    so.cases = o.cases;
    so.seed = o.seed;
    so.mask = mask;
    so.progress = !o.quiet;
    so.pins = shape_pins(o);
    so.pins.backend = forced;
    so.pins.check = par::parse_check_method(o.check);
    if (o.p > 0) so.pins.p = o.p;
    so.pins.params = pinned;
    so.memory_limit = limit;
    so.reruns = o.reruns;
    if (book != nullptr)
      so.on_case = [book](const par::run_case& c, const prop::case_verdict& v) {
        book->observe(c.to_string(), c, v);
      };
    status = run_suite(d, cat, chosen, so, program, o, std::move(plan), book);
  }
  return status;
}
}  // namespace

runner::command verify(CLI::App& app, const catalogue& cat, const std::string& program) {
  auto o = std::make_shared<verify_options>();
  auto* verify = app.add_subcommand(
      "verify", "Run the properties on generated cases (under mpirun; rank 0 drives)");
  auto* strategy_opt = verify->add_option("--strategy", o->strategies,
                                          "Strategy to verify (repeatable; default: all)");
  auto* cases_opt =
      verify->add_option("--cases", o->cases, "Cases per strategy")->capture_default_str();
  auto* seed_opt = verify->add_option("--seed", o->seed, "RapidCheck seed")
                       ->capture_default_str()
                       ->check(runner::unsigned_integer());
  auto* replay_opt =
      verify->add_option("--replay", o->replay, "Run exactly one case, given by its replay line");
  auto* replay_file_opt =
      verify->add_option("--replay-file", o->replay_file,
                         "Run the cases of a file of replay lines, one a line ('-': stdin); a line "
                         "without strategy= runs on every kernel under test that takes it");
  auto* corpus_opt = verify->add_option(
      "--corpus", o->corpus,
      "Regression corpus: replay its lines on the kernels under test first, then "
      "append every new shrunk failure");
  replay_opt->excludes(replay_file_opt)->excludes(corpus_opt);
  replay_file_opt->excludes(corpus_opt);
  verify->add_option("--junit", o->junit,
                     "Write JUnit XML results to this file (rewritten as each strategy finishes)");
  verify->add_option("--json", o->json,
                     "Write JSON results to this file (rewritten as each strategy finishes)");
  verify
      ->add_option("--property", o->properties,
                   "Properties to check: all, or a list of forward,backward,ledger,memory,"
                   "determinism,replicas")
      ->capture_default_str();
  verify
      ->add_option("--case-timeout", o->case_timeout,
                   "Seconds before the watchdog ends a hung case")
      ->capture_default_str();
  verify
      ->add_option("--reruns", o->reruns,
                   "Run a failing case this many more times before it is reported ('reproduced k "
                   "of n'; fewer than all: intermittent, and shrinking keeps a candidate that "
                   "fails in any of its 1 + n runs)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  verify
      ->add_option("--repeat", o->repeat,
                   "With --replay, --replay-file or --corpus: run each replayed case up to this "
                   "many times, until it fails (an intermittent failure's replay line sets it)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  verify->add_flag("--quiet", o->quiet, "No progress lines");
  verify->add_option("--baseline", o->baseline,
                     "Each case's output digests and shares of both bounds: recorded in FILE when "
                     "it does not exist, else compared with it (drift: bits changed; growth: a "
                     "share grown past --baseline-growth times)");
  verify->add_option("--baseline-fail", o->baseline_fail,
                     "Lanes of --baseline that fail the run (exit 1), not only warn: drift, "
                     "growth or drift,growth");
  verify
      ->add_option("--baseline-growth", o->baseline_growth,
                   "The factor past which a share of a bound has grown")
      ->capture_default_str();
  verify->add_flag("--baseline-update", o->baseline_update,
                   "Rewrite the --baseline file with this run's values");
  auto* p_opt = verify->add_option("--p", o->p,
                                   "Run every case on exactly this many workers (default: drawn)");
  auto* param_opt = verify->add_option(
      "--param", o->params, "Pin a strategy parameter in every case, e.g. dp=2 (repeatable)");
  auto* m_opt = verify->add_option("--M", o->m_pin,
                                   "Draw every case's M from this value or range, e.g. 4096 or "
                                   "1024..4096 (shrinking stays inside it; default: drawn)");
  auto* n_opt = verify->add_option("--N", o->n_pin, "The same for N");
  auto* k_opt = verify->add_option("--K", o->k_pin, "The same for K");
  runner::add_memory_limit(verify, o->memory_limit_text);
  verify->add_option("--log-cases", o->log_cases,
                     "Append every case line to this file before the case runs (replays with "
                     "--replay-file)");
  auto* backend_opt = verify->add_option("--backend", o->backend,
                                         "Run every case's collectives on this backend: mpi or "
                                         "native, native:all_reduce=tree for the tree all-reduce "
                                         "(default: drawn per case)");
  auto* check_opt =
      verify
          ->add_option("--check", o->check,
                       "How every case's outputs are judged: reference (element by element, "
                       "O(M·N·K)), projection (a random ±1 projection of each block, O(n²)), or "
                       "auto: projection when a case's M·N·K is above 2^33 (a replay line carries "
                       "check= when not auto)")
          ->capture_default_str();
  // A replay line is the whole case: what would change it, or pick cases, is refused beside it
  // rather than ignored. A replay file's lines pick their kernels from --strategy.
  for (CLI::Option* o :
       {cases_opt, seed_opt, p_opt, param_opt, backend_opt, check_opt, m_opt, n_opt, k_opt}) {
    replay_opt->excludes(o);
    replay_file_opt->excludes(o);
  }
  replay_opt->excludes(strategy_opt);
  verify
      ->add_option("--dump", o->dump,
                   "With --replay: write the case's inputs and outputs (parallel, reference, "
                   "oracle) and magnitude products as .npy files into this directory")
      ->needs(replay_opt);

  p_opt->check(runner::not_empty())->check(CLI::Range(1, par::max_parts));
  // Before MPI starts: a line past 128 KiB is refused as it is parsed.
  replay_opt->check(runner::replay_line_length());
  return {verify, [] { return true; }, [o, &cat, program] { return do_verify(cat, *o, program); }};
}

}  // namespace shardcheck::commands
