#include "strategies/layer_pair.hpp"

#include <utility>

namespace shardcheck::par {

layer_pair::layer_pair(std::string name, std::string summary, par::placement outside)
    : outside_(outside) {
  info_.name = std::move(name);
  info_.summary = std::move(summary);
  info_.min_layers = 2;
  info_.max_layers = 2;
  info_.dtypes.insert(info_.dtypes.end(), {dtype::bf16, dtype::f16});
  info_.policies = mixed::reducing_policies();
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

std::int64_t layer_pair::scratch16_forward(const run_case& c, int r, std::int64_t rows) {
  if (!is_storage16(c.prob.type)) return 0;
  const std::int64_t h = c.part("H").size(r);
  return (rows * c.prob.K + h * c.prob.K + rows * h + c.prob.N * h) * 4;
}

std::int64_t layer_pair::scratch16_backward(const run_case& c, int r, std::int64_t rows) {
  if (!is_storage16(c.prob.type)) return 0;
  const std::int64_t h = c.part("H").size(r);
  return (rows * c.prob.K + rows * c.prob.N + 2 * rows * h + 2 * (h * c.prob.K + c.prob.N * h)) * 4;
}

std::vector<chain_lengths> layer_pair::chains(const run_case& c, collective forward,
                                              collective backward) {
  const std::int64_t m = c.prob.M, n = c.prob.N, k = c.prob.K, h = c.part("H").max_size();
  const std::int64_t fwd = reduction_depth(c.backend, forward, c.p, m * n);
  const std::int64_t bwd = reduction_depth(c.backend, backward, c.p, m * k);
  // dX's and Y's chains end in the reduction; H_1, dA_1 and both dW are local.
  return {{k, h + bwd, m, {.dx = bwd}}, {h + fwd, n, m, {.y = fwd}}};
}

}  // namespace shardcheck::par
