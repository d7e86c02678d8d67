// libFuzzer target: strategy parameters as text, "name=value" tokens as `--param`, explain's
// `--param` and replay lines give them, e.g. "dp=2 tp=2" or "gather=1 bucket=64". Each kernel
// takes them on a small case (M=5 N=3 K=4, its fewest layers) at p = 1, 2, 3, 4, 8 and at the
// product of its divides_p parameters (the workers their mesh factors need): complete, validate,
// plan and cost (case_checks), or refuse with a shardcheck::error.
#include <string>

#include "case_checks.hpp"
#include "fuzz_check.hpp"
#include "shardcheck/parallel/case.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace shardcheck;
  const std::string_view params = fuzz::text(data, size);
  par::run_case given;
  try {
    given = par::run_case::parse("strategy=? p=1 M=5 N=3 K=4 " + std::string(params));
  } catch (const error&) {
    return 0;
  }
  for (const auto& k : fuzz::kernels().all()) {
    const par::kernel_info& info = k->info();
    par::run_case c = given;
    c.strategy = k->name();
    if (c.prob.hidden.empty())
      for (std::size_t l = 1; l < info.min_layers; ++l) c.prob.hidden.push_back(2);
    std::int64_t factors = 1;
    for (const par::param_spec& ps : info.params)
      if (const auto it = c.params.find(ps.name); ps.divides_p && it != c.params.end())
        if (it->second < 1 || __builtin_mul_overflow(factors, it->second, &factors) ||
            factors > par::max_parts)
          factors = 0;
    for (const std::int64_t p : {std::int64_t{1}, std::int64_t{2}, std::int64_t{3}, std::int64_t{4},
                                 std::int64_t{8}, factors}) {
      if (p < 1) continue;
      c.p = static_cast<int>(p);
      fuzz::check_case(*k, c);
    }
  }
  return 0;
}
