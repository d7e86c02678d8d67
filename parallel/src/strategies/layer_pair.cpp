#include "strategies/layer_pair.hpp"

#include <utility>

namespace shardcheck::par {

layer_pair::layer_pair(std::string name, std::string summary, par::placement outside)
    : outside_(outside) {
  info_.name = std::move(name);
  info_.summary = std::move(summary);
  info_.min_layers = 2;
  info_.max_layers = 2;
}

layout layer_pair::placement(tensor_slot t, const run_case& c) const {
  if (t.t != tensor::w && t.t != tensor::dw) return {outside_};
  // W_1's H is its rows in out_in; W_2's H is its columns in out_in.
  const bool out_in = c.prob.layout == weight_layout::out_in;
  return {placement::S((t.layer == 0) == out_in ? 0 : 1)};
}

std::int64_t layer_pair::weight_bytes(const run_case& c, int r) {
  const std::int64_t h = c.part("H").size(r);
  return (h * c.prob.K + h * c.prob.N) * static_cast<std::int64_t>(size_of(c.prob.type));
}

std::int64_t layer_pair::hidden_bytes(const run_case& c, int r, std::int64_t rows) {
  return rows * c.part("H").size(r) * static_cast<std::int64_t>(size_of(c.prob.type));
}

std::vector<chain_lengths> layer_pair::chains(const run_case& c, collective forward,
                                              collective backward) {
  const std::int64_t m = c.prob.M, n = c.prob.N, k = c.prob.K, h = c.part("H").max_size();
  return {{k, h + reduction_depth(c.backend, backward, c.p, m * k), m},
          {h + reduction_depth(c.backend, forward, c.p, m * n), n, m}};
}

}  // namespace shardcheck::par
