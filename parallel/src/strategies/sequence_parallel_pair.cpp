#include "strategies/sequence_parallel_pair.hpp"

#include <algorithm>

namespace shardcheck::par {

std::string sequence_parallel_pair::summary() const {
  return "two layers split as column_row_pair (part.H), X, Y, dY, dX sharded by rows (part.M); "
         "X all-gathered, Y reduce-scattered; backward all-gathers X and dY, reduce-scatters dX";
}

layout sequence_parallel_pair::placement_of(tensor t, const run_case& c) const {
  if (t == tensor::w || t == tensor::dw) return layer_pair::weight_placement(0, c);
  return {placement::S(0)};
}

cost_estimate sequence_parallel_pair::cost(const run_case& c, std::span<const int> coords) const {
  const int r = coords[0];
  const partition& rows = c.part("M");
  const std::size_t es = size_of(c.prob.type);
  const auto s = static_cast<std::int64_t>(es);
  const std::int64_t m = c.prob.M, n = c.prob.N, k = c.prob.K, mr = rows.size(r);
  cost_estimate e;
  e.forward.push_back(all_gather_entry(c.backend, rows.scaled(k), r, es));
  e.forward.push_back(reduce_scatter_entry(c.backend, rows.scaled(n), r, es));
  // Gathered X (M×K), H_r (M×h_r), the partial (M×N) and this rank's rows of Y.
  e.peak_forward = m * k * s + layer_pair::hidden_bytes(c, r, m) + m * n * s + mr * n * s;
  e.backward.push_back(all_gather_entry(c.backend, rows.scaled(k), r, es));
  e.backward.push_back(all_gather_entry(c.backend, rows.scaled(n), r, es));
  e.backward.push_back(reduce_scatter_entry(c.backend, rows.scaled(k), r, es));
  // Gathered X and dY, H_r and dA_r, dW_1,r and dW_2,r, the partial dX (M×K) and this rank's rows.
  e.peak_backward = m * k * s + m * n * s + 2 * layer_pair::hidden_bytes(c, r, m) +
                    layer_pair::weight_bytes(c, r) + m * k * s + mr * k * s;
  e.layer_chains = layer_pair::chains(c, collective::reduce_scatter, collective::reduce_scatter);
  return e;
}

namespace {
// The full M×cols matrix whose rows part.M are spread over the ranks, this rank's rows given.
template <class T>
matrix<T> gathered(comm& world, const partition& rows, const matrix<T>& mine, std::size_t cols) {
  matrix<T> full(static_cast<std::size_t>(rows.length()), cols);
  std::copy(mine.data.begin(), mine.data.end(),
            full.data.begin() +
                static_cast<std::ptrdiff_t>(static_cast<std::size_t>(rows.offset(world.rank())) * cols));
  world.all_gather<T>(full.span(), rows, static_cast<std::int64_t>(cols));
  return full;
}
}  // namespace

template <class T>
void sequence_parallel_pair::forward_layers_t(context& ctx, const run_case& c, const matrix<T>& x,
                                              std::span<const any_matrix> ws, matrix<T>& y) const {
  comm& world = ctx.grid.axis(0);
  const int r = world.rank();
  const auto m = static_cast<std::size_t>(c.prob.M), n = static_cast<std::size_t>(c.prob.N);
  const partition& rows = c.part("M");
  const matrix<T> x_full = gathered<T>(world, rows, x, static_cast<std::size_t>(c.prob.K));
  matrix<T> h(m, static_cast<std::size_t>(c.part("H").size(r))), partial(m, n);
  layer_pair::forward_partial<T>(c, m, x_full.data.data(), ws, h.data.data(), partial.data.data());
  if (defect_ == defect::scatter_wrong_partition) {
    const partition even = partition::balanced(rows.length(), c.p);
    y = matrix<T>(static_cast<std::size_t>(even.size(r)), n);
    world.reduce_scatter_sum<T>(partial.span(), y.span(), even, static_cast<std::int64_t>(n));
    return;
  }
  y = matrix<T>(static_cast<std::size_t>(rows.size(r)), n);
  world.reduce_scatter_sum<T>(partial.span(), y.span(), rows, static_cast<std::int64_t>(n));
}

template <class T>
void sequence_parallel_pair::backward_layers_t(context& ctx, const run_case& c, const matrix<T>& x,
                                               std::span<const any_matrix> ws, const matrix<T>& dy,
                                               matrix<T>& dx, std::span<any_matrix> dws) const {
  comm& world = ctx.grid.axis(0);
  const int r = world.rank();
  const auto m = static_cast<std::size_t>(c.prob.M), k = static_cast<std::size_t>(c.prob.K);
  const partition& rows = c.part("M");
  const matrix<T> x_full = gathered<T>(world, rows, x, k);
  const matrix<T> dy_full = gathered<T>(world, rows, dy, static_cast<std::size_t>(c.prob.N));
  const auto hr = static_cast<std::size_t>(c.part("H").size(r));
  matrix<T> h(m, hr), da(m, hr), dx_partial(m, k);
  layer_pair::backward_partial<T>(c, m, x_full.data.data(), ws, dy_full.data.data(),
                                  h.data.data(), da.data.data(), dws, dx_partial.data.data());
  dx = matrix<T>(static_cast<std::size_t>(rows.size(r)), k);
  world.reduce_scatter_sum<T>(dx_partial.span(), dx.span(), rows, static_cast<std::int64_t>(k));
}

SHARDCHECK_INSTANTIATE_STACK_STRATEGY(sequence_parallel_pair);

}  // namespace shardcheck::par
