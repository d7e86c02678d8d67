#pragma once
// The subcommands of `shardcheck`, one file each (list.cpp, explain.cpp, verify.cpp,
// selftest.cpp, shrink.cpp; compare, audit and scale in cli/src/), all run by runner.hpp; and what
// they share: the catalogue of kernels a name picks.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../runner.hpp"
#include "shardcheck/parallel/plan.hpp"
#include "shardcheck/parallel/registry.hpp"
#include "shardcheck/properties/checks.hpp"
#include "shardcheck/properties/mutants.hpp"

namespace shardcheck::commands {

using runner::usage_error;

// Built-in, collective checks (checks.hpp), extra and (for replay lines and explicit --strategy
// only) mutant kernels, each as the subject a case runs.
struct catalogue {
  par::registry builtin = par::builtin_strategies();
  par::registry checks = prop::collective_checks();
  par::registry extra;
  prop::mutant_set mutants{{&builtin, &checks}};
  // The extra kernels' cells (verify --strategy mutant.<operator>@<kernel>); selftest's matrix is
  // the built-in one.
  prop::mutant_set extra_mutants;
  std::map<std::string, prop::subject, std::less<>> plain;

  explicit catalogue(par::registry more);
  [[nodiscard]] const prop::subject* find(std::string_view name) const;
  // The mutant cell of that name, or nullptr.
  [[nodiscard]] const prop::mutant_cell* cell(std::string_view name) const;
  // Every kernel verify checks: built-in, collective checks and extra (no mutants).
  [[nodiscard]] std::vector<const par::kernel*> normal() const;
  // The strategies compare, audit and scale measure (not the collective checks).
  [[nodiscard]] std::vector<const par::kernel*> strategies() const;
  // The kernel of a name, or usage_error listing the known ones.
  [[nodiscard]] const par::kernel& need(const std::string& name) const;
};

// A case for `list` and `explain`: the strategy's defaults on a given shape.
[[nodiscard]] par::run_case default_case(const par::kernel& s, int p, std::int64_t m,
                                         std::int64_t n, std::int64_t k);
// "X S(0)  W R  Y S(0)"
[[nodiscard]] std::string placements_line(const par::case_plan& plan);
// "name=integer", a strategy parameter given as `option` (--param), or usage_error: "gather=1
// mode=exact", "gather=" and "gather=99999999999999999999" (past 64 bits) are refused.
[[nodiscard]] std::pair<std::string, std::int64_t> parse_param(const std::string& kv,
                                                               std::string_view option);
// The watchdog's limit: from 0.1 s (a case needs some time to start) to 10⁶ s (11.6 days), which
// any clock holds.
void check_case_timeout(double seconds);

template <class T>
std::string join(const std::vector<T>& values) {
  using std::to_string;
  std::string out;
  for (const T& v : values) {
    if (!out.empty()) out += ",";
    out += to_string(v);
  }
  return out;
}

// Each adds its subcommand to app; `program` is argv[0], for replay lines.
runner::command list(CLI::App& app, const catalogue& cat);
runner::command explain(CLI::App& app, const catalogue& cat);
runner::command verify(CLI::App& app, const catalogue& cat, const std::string& program);
runner::command selftest(CLI::App& app, const catalogue& cat, const std::string& program);
runner::command shrink(CLI::App& app, const catalogue& cat, const std::string& program);

}  // namespace shardcheck::commands
