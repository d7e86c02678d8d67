#include <charconv>
#include <cmath>

#include "commands.hpp"

namespace shardcheck::commands {

catalogue::catalogue(par::registry more) : extra(std::move(more)), extra_mutants(extra) {
  for (const par::registry* r : {&builtin, &checks, &extra})
    for (const auto& k : r->all()) plain.emplace(k->name(), prop::subject{k.get(), {}});
}

const prop::subject* catalogue::find(std::string_view name) const {
  if (const auto it = plain.find(name); it != plain.end()) return &it->second;
  if (const prop::subject* m = mutants.find(name)) return m;
  return extra_mutants.find(name);
}

const prop::mutant_cell* catalogue::cell(std::string_view name) const {
  if (const prop::mutant_cell* c = mutants.cell(name)) return c;
  return extra_mutants.cell(name);
}

std::vector<const par::kernel*> catalogue::normal() const {
  std::vector<const par::kernel*> out;
  for (const par::registry* r : {&builtin, &checks, &extra})
    for (const auto& k : r->all()) out.push_back(k.get());
  return out;
}

std::vector<const par::kernel*> catalogue::strategies() const {
  std::vector<const par::kernel*> out;
  for (const par::registry* r : {&builtin, &extra})
    for (const auto& k : r->all()) out.push_back(k.get());
  return out;
}

const par::kernel& catalogue::need(const std::string& name) const {
  const prop::subject* s = find(name);
  if (s == nullptr) {
    std::string known;
    for (const auto* n : normal()) {
      if (!known.empty()) known += ", ";
      known += n->name();
    }
    throw usage_error("unknown strategy '" + name + "' (known: " + known +
                      "; and mutant.<operator>@<kernel>, listed by selftest)");
  }
  return *s->k;
}

std::string placements_line(const par::case_plan& plan) {
  std::string out;
  for (const par::tensor_plan& t : plan.tensors) {
    if (!out.empty()) out += "  ";
    out += t.name;
    out += ' ';
    out += par::to_string(t.where);
  }
  return out;
}

par::run_case default_case(const par::kernel& s, int p, std::int64_t m, std::int64_t n,
                           std::int64_t k) {
  par::run_case c;
  c.strategy = s.name();
  c.p = p;
  c.prob.M = m;
  c.prob.N = n;
  c.prob.K = k;
  // A stack strategy's smallest stack, hidden widths 1 (explain's --H replaces them).
  c.prob.hidden.assign(s.info().min_layers - 1, 1);
  return c;
}

std::pair<std::string, std::int64_t> parse_param(const std::string& kv, std::string_view option) {
  const auto eq = kv.find('=');
  const char* end = kv.data() + kv.size();
  const char* first = eq == std::string::npos ? end : kv.data() + eq + 1;
  std::int64_t value = 0;
  const auto [ptr, ec] = std::from_chars(first, end, value);
  if (eq == std::string::npos || eq == 0 || first == end || ec != std::errc() || ptr != end)
    throw usage_error(std::string(option) + " '" + kv +
                      "' is not name=integer (a 64-bit integer, e.g. gather=0)");
  return {kv.substr(0, eq), value};
}

void check_case_timeout(double seconds) {
  if (!(seconds >= 0.1) || !std::isfinite(seconds) || seconds > 1e6)
    throw usage_error("--case-timeout must be a number of seconds in [0.1, 1000000]");
}

}  // namespace shardcheck::commands
