#pragma once
// The strategies shardcheck knows. Adding one: its file under parallel/strategies/ and one line
// in registry.cpp.
#include <memory>
#include <string_view>
#include <vector>

#include "shardcheck/parallel/strategy.hpp"

namespace shardcheck::par {

class registry {
 public:
  void add(std::unique_ptr<strategy> s);
  // nullptr if absent.
  [[nodiscard]] const strategy* find(std::string_view name) const;
  [[nodiscard]] const std::vector<std::unique_ptr<strategy>>& all() const { return items_; }

 private:
  std::vector<std::unique_ptr<strategy>> items_;
};

// The built-in strategies.
[[nodiscard]] registry builtin_strategies();

}  // namespace shardcheck::par
