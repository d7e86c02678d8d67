#pragma once
// Deliberately broken strategies. Each must be caught by the property it names, which proves
// that property can fail. They are never in the normal registry; `shardcheck selftest` runs them.
#include <string>
#include <vector>

#include "shardcheck/parallel/registry.hpp"
#include "shardcheck/properties/harness.hpp"

namespace shardcheck::prop {

struct mutant_info {
  std::string name;
  std::string defect;  // what is broken, in words
  property expected;   // the property that must catch it
};

// The mutants as strategies (names start with "mutant.") and what each must be caught by.
[[nodiscard]] par::registry mutant_strategies();
[[nodiscard]] std::vector<mutant_info> mutant_catalogue();

}  // namespace shardcheck::prop
