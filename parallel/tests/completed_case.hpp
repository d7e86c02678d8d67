#pragma once
// The built-in kernels, and a case from its replay line completed and validated against the
// built-in kernel it names.
#include <stdexcept>
#include <string>

#include "shardcheck/parallel/registry.hpp"

namespace shardcheck::par {

inline const registry& builtins() {
  static const registry r = builtin_strategies();
  return r;
}

inline const kernel& builtin(const std::string& name) {
  const kernel* k = builtins().find(name);
  if (k == nullptr) throw std::invalid_argument("no built-in kernel '" + name + "'");
  return *k;
}

inline run_case completed(const std::string& line) {
  run_case c = run_case::parse(line);
  complete_and_validate(builtin(c.strategy), c);
  return c;
}

}  // namespace shardcheck::par
