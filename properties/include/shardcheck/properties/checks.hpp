#pragma once
// The collectives checked as pseudo-strategies — collective.broadcast, collective.all_to_all and
// collective.overlap (properties/src/checks/) — are checks of shardcheck's own collectives, not
// strategies: they live beside the harness, and the product's registry
// (par::builtin_strategies()) does not hold them. verify, selftest, list and explain take them
// with the strategies; compare, audit, scale and the benchmarks, which measure strategies, do not.
#include "shardcheck/parallel/registry.hpp"

namespace shardcheck::prop {

// The three collective checks, in a registry of their own.
[[nodiscard]] par::registry collective_checks();
// Adds them to r, after its kernels (par::builtin_strategies() and the checks: what verify and
// selftest check when no strategy is named).
void add_collective_checks(par::registry& r);

}  // namespace shardcheck::prop
