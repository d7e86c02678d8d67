#pragma once
// A case from its replay line, completed and validated against the built-in strategy it names.
#include <stdexcept>
#include <string>

#include "shardcheck/parallel/registry.hpp"

namespace shardcheck::par {

inline run_case completed(const std::string& line) {
  const registry r = builtin_strategies();
  run_case c = run_case::parse(line);
  const strategy* s = r.find(c.strategy);
  if (s == nullptr) throw std::invalid_argument("no built-in strategy '" + c.strategy + "'");
  complete_and_validate(*s, c);
  return c;
}

}  // namespace shardcheck::par
