#include "strategies/column_row_pair.hpp"

namespace shardcheck::par {

std::string column_row_pair::summary() const {
  return "two layers, W1 split on its outputs and W2 on its inputs (part.H), X and Y replicated; "
         "Y all-reduced; dX all-reduced; dW1, dW2 sharded";
}

layout column_row_pair::placement_of(tensor t, const run_case& c) const {
  if (t == tensor::w || t == tensor::dw) return layer_pair::weight_placement(0, c);
  return {placement::R()};
}

cost_estimate column_row_pair::cost(const run_case& c, std::span<const int> coords) const {
  const int r = coords[0];
  const std::size_t es = size_of(c.prob.type);
  const auto s = static_cast<std::int64_t>(es);
  const std::int64_t m = c.prob.M, n = c.prob.N, k = c.prob.K;
  cost_estimate e;
  e.forward.push_back(all_reduce_entry(c.backend, m * n, r, c.p, es));
  // H_r (M×h_r) and Y (M×N, reduced in place).
  e.peak_forward = layer_pair::hidden_bytes(c, r, m) + m * n * s;
  e.backward.push_back(all_reduce_entry(c.backend, m * k, r, c.p, es));
  // H_r and dA_r (M×h_r each), dW_1,r and dW_2,r, dX (M×K, reduced in place).
  e.peak_backward = 2 * layer_pair::hidden_bytes(c, r, m) + layer_pair::weight_bytes(c, r) +
                    m * k * s;
  e.layer_chains = layer_pair::chains(c, collective::all_reduce, collective::all_reduce);
  return e;
}

template <class T>
void column_row_pair::forward_layers_t(context& ctx, const run_case& c, const matrix<T>& x,
                                       std::span<const any_matrix> ws, matrix<T>& y) const {
  comm& world = ctx.grid.axis(0);
  const auto m = static_cast<std::size_t>(c.prob.M), n = static_cast<std::size_t>(c.prob.N);
  matrix<T> h(m, static_cast<std::size_t>(c.part("H").size(world.rank())));
  y = matrix<T>(m, n);
  layer_pair::forward_partial<T>(c, m, x.data.data(), ws, h.data.data(), y.data.data(),
                                 defect_ == defect::wrong_w2_shard);
  world.all_reduce_sum<T>(y.span());
}

template <class T>
void column_row_pair::backward_layers_t(context& ctx, const run_case& c, const matrix<T>& x,
                                        std::span<const any_matrix> ws, const matrix<T>& dy,
                                        matrix<T>& dx, std::span<any_matrix> dws) const {
  comm& world = ctx.grid.axis(0);
  const auto m = static_cast<std::size_t>(c.prob.M), k = static_cast<std::size_t>(c.prob.K);
  const auto hr = static_cast<std::size_t>(c.part("H").size(world.rank()));
  matrix<T> h(m, hr), da(m, hr);
  dx = matrix<T>(m, k);
  layer_pair::backward_partial<T>(c, m, x.data.data(), ws, dy.data.data(), h.data.data(),
                                  da.data.data(), dws, dx.data.data());
  world.all_reduce_sum<T>(dx.span());
}

SHARDCHECK_INSTANTIATE_STACK_STRATEGY(column_row_pair);

}  // namespace shardcheck::par
