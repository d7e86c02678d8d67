#pragma once
// The kernels shardcheck knows. Adding one: its file under parallel/strategies/ and one line in
// registry.cpp.
#include <memory>
#include <string_view>
#include <vector>

#include "shardcheck/parallel/kernel.hpp"

namespace shardcheck::par {

class registry {
 public:
  // Throws if a kernel of the same name is registered already.
  void add(std::unique_ptr<kernel> k);
  // nullptr if absent.
  [[nodiscard]] const kernel* find(std::string_view name) const;
  [[nodiscard]] const std::vector<std::unique_ptr<kernel>>& all() const { return items_; }

 private:
  std::vector<std::unique_ptr<kernel>> items_;
};

// The built-in kernels.
[[nodiscard]] registry builtin_strategies();

}  // namespace shardcheck::par
