#pragma once
// What `verify` and `explain` compute from a case before any rank runs it, for the fuzz targets
// on replay lines and on parameters.
#include "shardcheck/parallel/kernel.hpp"
#include "shardcheck/parallel/registry.hpp"

namespace shardcheck::fuzz {

// The built-in kernels, built once.
[[nodiscard]] const par::registry& kernels();

// On kernel k: complete_and_validate (a refusal ends the check), the completed line replays to
// the same completed case, explain's plans and claims at ranks 0, 1 and p − 1, and for p ≤ 4
// (the most ranks a test launches) every rank's plan and claims and the resource check
// (prop::check_footprint against 8 GiB).
void check_case(const par::kernel& k, par::run_case c);

}  // namespace shardcheck::fuzz
