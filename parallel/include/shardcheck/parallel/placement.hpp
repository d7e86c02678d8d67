#pragma once
// Shardings as data (one placement per mesh axis): R replicate, S(d) shard tensor dimension d
// (0 = rows, 1 = columns) by the case's partition of that problem dimension, P partial sums.
// A layout prints as its placements joined by commas: "S(0)", "R", "S(0),S(1)".
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shardcheck::par {

struct placement {
  enum class kind { replicate, shard, partial };
  kind what = kind::replicate;
  int dim = 0;

  [[nodiscard]] static placement R() { return {kind::replicate, 0}; }
  [[nodiscard]] static placement S(int d) { return {kind::shard, d}; }
  [[nodiscard]] static placement P() { return {kind::partial, 0}; }
  [[nodiscard]] std::string to_string() const;
  // "R", "P", "S(0)", "S(1)"; throws invalid_problem otherwise.
  [[nodiscard]] static placement parse(std::string_view s);
  friend bool operator==(const placement&, const placement&) = default;
};

using layout = std::vector<placement>;
[[nodiscard]] std::string to_string(const layout& l);
[[nodiscard]] layout parse_layout(std::string_view s);

// The tensors of a linear layer; their dimensions are problem dimensions.
enum class tensor { x, w, y, dy, dx, dw };
[[nodiscard]] std::string_view to_string(tensor t);
inline constexpr tensor all_tensors[] = {tensor::x, tensor::w, tensor::y,
                                         tensor::dy, tensor::dx, tensor::dw};

}  // namespace shardcheck::par
