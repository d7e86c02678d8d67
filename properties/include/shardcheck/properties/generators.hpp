#pragma once
// RapidCheck generators for cases: shapes with edge cases weighted (0, 1, primes, fewer rows than
// workers), worker counts up to the launched ranks, partitions with uneven and empty parts, the
// strategy's parameters, dtype, layout, value mode, seed, collectives backend.
#include <rapidcheck.h>

#include <map>
#include <optional>

#include "shardcheck/parallel/kernel.hpp"

namespace shardcheck::prop {

[[nodiscard]] rc::Gen<std::int64_t> dimension(int p);
[[nodiscard]] rc::Gen<par::partition> partition_of(std::int64_t n, int parts);
// A value of a strategy parameter; wide ranges are drawn evenly over scales.
[[nodiscard]] rc::Gen<std::int64_t> parameter(const par::param_spec& ps);
// One of p's divisors, each equally likely (a divides_p parameter: the rows of a 2D mesh).
[[nodiscard]] rc::Gen<std::int64_t> divisor_of(int p);
// What a run pins instead of drawing: the backend, the worker count, strategy parameters (e.g.
// a mesh's factors, dp=2 tp=2 on 8 ranks: pp = 2).
struct case_pins {
  std::optional<par::backend_spec> backend;  // with its algorithm choices
  std::optional<int> p;
  std::map<std::string, std::int64_t> params;
};
// A complete, validated case for strategy s with 1 ≤ p ≤ max_p, the rest drawn except what
// `pins` fixes; a pinned parameter the strategy does not have is left out.
[[nodiscard]] rc::Gen<par::run_case> case_for(const par::kernel& s, int max_p,
                                              const case_pins& pins = {});

}  // namespace shardcheck::prop
