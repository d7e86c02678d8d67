// libFuzzer target: a replay line, as `verify --replay`, `--replay-file` and `--corpus` take it,
// e.g. "strategy=data_parallel p=3 M=7 N=5 K=4 dtype=f64 mode=exact part.M=3,0,4 seed=1" or,
// without strategy=, a line for every kernel. Accepted lines must print back to themselves, and
// each kernel that would run the case must complete, validate, plan and cost it (case_checks).
#include <string>

#include "case_checks.hpp"
#include "fuzz_check.hpp"
#include "shardcheck/parallel/case.hpp"
#include "src/corpus.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace shardcheck;
  const std::string_view line = fuzz::text(data, size);
  par::run_case parsed;
  const bool named = corpus::names_strategy(line);
  try {
    corpus::check_length(line, "--replay");
    parsed = par::run_case::parse(named ? std::string(line) : "strategy=? " + std::string(line));
  } catch (const error&) {
    return 0;
  }
  const std::string printed = parsed.to_string();
  fuzz::require(par::run_case::parse(printed).to_string() == printed,
                "a parsed line prints back to itself");
  // The kernel a named line runs on (a mutant cell's line also on its kernel), else every one.
  for (const auto& k : fuzz::kernels().all())
    if (!named || k->name() == corpus::base_kernel(parsed.strategy)) {
      par::run_case c = parsed;
      c.strategy = k->name();
      fuzz::check_case(*k, c);
    }
  return 0;
}
