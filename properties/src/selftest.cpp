#include "shardcheck/properties/selftest.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <string_view>
#include <vector>

#include "shardcheck/properties/verdict.hpp"

namespace shardcheck::prop {

namespace {
constexpr std::pair<property, char> letters[] = {
    {property::runs, 'R'},     {property::forward, 'F'},   {property::backward, 'B'},
    {property::ledger, 'L'},   {property::memory, 'M'},    {property::determinism, 'D'},
    {property::replicas, 'P'}, {property::invariance, 'I'}};

std::string letters_of(unsigned mask) {
  std::string s;
  for (const auto& [p, l] : letters)
    if ((mask & static_cast<unsigned>(p)) != 0) s += l;
  return s;
}

struct outcome_of_cell {
  bool ran = false;
  bool acted = false;
  unsigned caught = 0;   // the all-property run's smallest failing case
  unsigned focused = 0;  // caught only when run with one property
  int cases = 0;
  std::string message, replay;
  std::map<property, std::string> messages;  // a failure's message per property that gave one
};

// The message's property ("forward: …" is forward's), or runs.
property property_of(const std::string& message) {
  for (const property p : checked_properties)
    if (message.starts_with(std::string(to_string(p)) + ":")) return p;
  return property::runs;
}

bool caught(const outcome_of_cell& r) { return (r.caught | r.focused) != 0; }

std::string mark(const mutant_cell& c, const outcome_of_cell& r) {
  if (!c.applies) return "-";
  if (!r.ran) return "?";
  if (caught(r)) {
    std::string s = letters_of(r.caught);
    if (r.focused != 0) {
      s += '+';
      s += letters_of(r.focused);
    }
    return s;
  }
  return r.acted ? "!!" : "~";
}

std::vector<property> expected_of(std::string_view cell) {
  std::vector<property> out;
  for (const old_mutant& o : old_mutants())
    if (o.cell == cell) out.push_back(o.expected);
  return out;
}
}  // namespace

// The cases of a focused run, per case of the all-property run: some defects show only in rare
// cases (padded_buckets: a memory-monotone re-run whose smaller bucket splits W in two buckets
// of more than half its rows each fails about one case in a hundred).
constexpr int focused_factor = 5;

int run_selftest(driver& d, const mutant_set& m, const selftest_options& o,
                 const std::string& program) {
  std::FILE* out = o.out;
  const auto began = std::chrono::steady_clock::now();
  std::fprintf(out,
               "shardcheck selftest: every mutant cell against every property (%d ranks, up to "
               "%d cases per cell)\n",
               d.ranks(), o.cases);
  std::map<std::string, outcome_of_cell> results;
  for (const mutant_cell& c : m.cells()) {
    outcome_of_cell& r = results[c.name];
    if (!c.applies) continue;
    r.ran = true;
    const auto cell_began = std::chrono::steady_clock::now();
    const std::int64_t fired_before = c.fire_count();
    suite_options so;
    so.seed = o.seed;
    so.progress = false;
    so.cases = o.cases;
    so.pins.check = o.check;
    so.local_minimum = false;  // a caught cell needs no smaller case,
    so.reruns = 0;             // nor its rate
    const strategy_report rep = d.check(c.name, c.s, so);
    r.cases = rep.cases;
    r.acted = c.fire_count() > fired_before;
    if (!rep.passed) {
      r.caught = rep.failure.failed;
      r.message = rep.failure.message;
      r.messages.emplace(property_of(r.message), r.message);
      r.replay =
          replay_command(program, par::run_case::parse(rep.replay), so.mask, d.case_timeout());
    }
    // The cell's targeted cases (sizes the generators do not draw), each run once.
    for (const std::string& line : c.targeted) {
      par::run_case tc = par::run_case::parse(line);
      par::complete_and_validate(*c.s.k, tc);
      const case_verdict v = d.run(tc, so.mask);
      ++r.cases;
      if (v.failed == 0) continue;
      r.caught |= v.failed;
      if (r.message.empty()) r.message = v.message;
      r.messages.emplace(property_of(v.message), v.message);
      if (r.replay.empty()) r.replay = replay_command(program, tc, so.mask, d.case_timeout());
    }
    // An old mutant's own property, if the all-property run's smallest case does not show it.
    for (const property p : expected_of(c.name)) {
      const auto bit = static_cast<unsigned>(p);
      if ((r.caught & bit) != 0 && r.messages.contains(p)) continue;
      if ((r.caught & bit) != 0) {  // caught, its message another rank's or property's: its own
        suite_options focus = so;
        focus.mask = static_cast<unsigned>(property::runs) | bit;
        const strategy_report f = d.check(c.name, c.s, focus);
        r.cases += f.cases;
        if (!f.passed && (f.failure.failed & bit) != 0) r.messages.emplace(p, f.failure.message);
        continue;
      }
      suite_options focus = so;
      focus.seed = o.seed + 1;
      focus.cases = focused_factor * o.cases;
      focus.mask = static_cast<unsigned>(property::runs) | bit;
      const strategy_report f = d.check(c.name, c.s, focus);
      r.cases += f.cases;
      if (!f.passed && (f.failure.failed & bit) != 0) {
        r.focused |= bit;
        r.messages.emplace(p, f.failure.message);
        if (r.replay.empty())
          r.replay =
              replay_command(program, par::run_case::parse(f.replay), focus.mask, d.case_timeout());
      }
      r.acted = r.acted || c.fire_count() > fired_before;
    }
    if (o.progress)
      std::fprintf(
          stderr, "  %-52s %-8s %3d cases %6.1f s\n", c.name.c_str(), mark(c, r).c_str(), r.cases,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - cell_began).count());
  }

  // The matrix: strategies as numbered columns.
  const std::vector<std::string>& columns = m.strategies();
  std::fprintf(out, "\ncolumns:");
  for (std::size_t i = 0; i < columns.size(); ++i)
    std::fprintf(out, "%s %zu %s", i % 5 == 0 ? "\n " : "  ", i + 1, columns[i].c_str());
  std::fprintf(out,
               "\ncaught by: F forward  B backward  L ledger  M memory  D determinism  P replicas  "
               "R runs;  - does not apply  ~ never acted  !! acted, not caught  +x only alone\n\n");
  std::fprintf(out, "%-22s", "operator");
  for (std::size_t i = 0; i < columns.size(); ++i) std::fprintf(out, "%6zu", i + 1);
  std::fprintf(out, "\n");
  for (const mutant_operator& op : m.operators()) {
    std::fprintf(out, "%-22s", op.name.c_str());
    for (const std::string& s : columns) {
      const mutant_cell* c = m.cell(op.name, s);
      std::fprintf(out, "%6s", c == nullptr ? "" : mark(*c, results[c->name]).c_str());
    }
    std::fprintf(out, "\n");
  }

  // The old mutants: each must be caught by its property.
  int status = 0;
  std::fprintf(
      out, "\nthe gate: every defect the mutants have always modelled, caught by its property:\n");
  // An output's failure (forward, backward) names the shape of its error (verdict.hpp).
  int shaped = 0, specific = 0, outputs = 0;
  for (const old_mutant& old : old_mutants()) {
    const mutant_cell* c = m.cell(old.cell);
    const outcome_of_cell* r = c != nullptr ? &results[c->name] : nullptr;
    const auto bit = static_cast<unsigned>(old.expected);
    const bool ok = r != nullptr && ((r->caught | r->focused) & bit) != 0;
    if (!ok) status = 1;
    std::string shape;
    if (old.expected == property::forward || old.expected == property::backward) {
      ++outputs;
      if (r != nullptr)
        if (const auto at = r->messages.find(old.expected); at != r->messages.end())
          shape = shape_named(at->second);
      shape = shape.empty() ? "(no shape)" : "shape: " + shape;
      shaped += shape != "(no shape)" ? 1 : 0;
      specific += shape != "(no shape)" && shape != "shape: other" ? 1 : 0;
    }
    std::fprintf(out, "  %-28s %-48s %-12s %-10s %s\n", std::string(old.old_name).c_str(),
                 std::string(old.cell).c_str(), std::string(to_string(old.expected)).c_str(),
                 ok ? "caught" : "NOT CAUGHT", shape.c_str());
  }
  std::fprintf(out, "output failures with a shape: %d of %d, %d a specific one (not other)\n",
               shaped, outputs, specific);

  // The cells that acted and were not caught (findings), then those whose fault never acted.
  int caught_cells = 0, acted_cells = 0;
  std::vector<const mutant_cell*> missed, idle;
  for (const mutant_cell& c : m.cells()) {
    const outcome_of_cell& r = results[c.name];
    if (caught(r)) ++caught_cells;
    if (r.acted || caught(r)) ++acted_cells;
    if (!c.applies || caught(r)) continue;
    (r.acted ? missed : idle).push_back(&c);
  }
  std::fprintf(out, "\ncaught: %d of the %d cells whose fault acted\n", caught_cells, acted_cells);
  char timeout_option[64] = "";
  if (d.case_timeout() != default_case_timeout)
    std::snprintf(timeout_option, sizeof timeout_option, " --case-timeout %g", d.case_timeout());
  std::fprintf(out, "\ncells whose fault acted and no property failed (findings):\n");
  for (const mutant_cell* c : missed)
    std::fprintf(
        out, "  %s in %d cases; replay: %s %s verify --strategy %s --cases %d --seed %llu%s\n",
        c->name.c_str(), results[c->name].cases, launch_command(d.ranks()).c_str(), program.c_str(),
        c->name.c_str(), o.cases, static_cast<unsigned long long>(o.seed), timeout_option);
  if (missed.empty()) std::fprintf(out, "  none\n");
  if (!idle.empty()) {
    std::fprintf(out,
                 "\ncells whose fault never acted (~): the cost model names the collective, but "
                 "the strategy\nissues it in the other form (blocking or started) only:\n ");
    std::size_t width = 1;
    for (const mutant_cell* c : idle) {
      std::string cell(1, ' ');
      cell.append(c->name, c->name.find('.') + 1);
      if (width + cell.size() > 100) {
        std::fprintf(out, "\n ");
        width = 1;
      }
      std::fprintf(out, "%s", cell.c_str());
      width += cell.size();
    }
    std::fprintf(out, "\n");
  }

  if (status != 0) {
    std::fprintf(out, "\ngate cells not caught by their property, smallest failing cases:\n");
    for (const old_mutant& old : old_mutants()) {
      const outcome_of_cell& r = results[std::string(old.cell)];
      if (((r.caught | r.focused) & static_cast<unsigned>(old.expected)) != 0) continue;
      std::fprintf(out, "  %s: %s\n    %s\n", std::string(old.cell).c_str(),
                   r.message.empty() ? "(no failing case)" : r.message.c_str(), r.replay.c_str());
    }
  }
  std::fprintf(out, "\nselftest: %s (%.0f s)\n",
               status == 0 ? "every gate cell caught by its property" : "FAILED",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count());
  std::fflush(out);
  return status;
}

}  // namespace shardcheck::prop
