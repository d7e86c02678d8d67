#include "strategies/sequence_parallel_pair.hpp"

#include <algorithm>

#include "strategies/mixed_ops.hpp"

namespace shardcheck::par {

sequence_parallel_pair::sequence_parallel_pair()
    : layer_pair("sequence_parallel_pair",
                 "two layers split as column_row_pair (part.H), X, Y, dY, dX sharded by rows "
                 "(part.M); X all-gathered, Y reduce-scattered; backward all-gathers X and dY, "
                 "reduce-scatters dX",
                 placement::S(0)) {}

claims sequence_parallel_pair::cost(const run_case& c, std::span<const int> coords) const {
  const int r = coords[0];
  const partition& rows = c.part("M");
  const std::size_t es = size_of(c.prob.type), er = mixed::reduce_bytes(c);
  const auto s = static_cast<std::int64_t>(es);
  const std::int64_t m = c.prob.M, n = c.prob.N, k = c.prob.K, mr = rows.size(r);
  // The partials are f32 in a 16-bit case (s_p bytes an element), and its reduce-scatter rounds
  // them first (reduce=storage: an M×cols copy in T) or sums into f32 rows (reduce=f32).
  const bool b16 = is_storage16(c.prob.type);
  const std::int64_t s_p = b16 ? 4 : s;
  const auto scatter16 = [&](std::int64_t cols) -> std::int64_t {
    if (!b16) return 0;
    return mixed::reduce_in_storage(c) ? m * cols * s : mr * cols * 4;
  };
  claims out;
  auto& log = out.collectives.emplace();
  auto& peak = out.peak.emplace();
  log.forward.push_back(all_gather_entry(c.backend, rows.scaled(k), r, es));
  log.forward.push_back(reduce_scatter_entry(c.backend, rows.scaled(n), r, er));
  // Gathered X (M×K), H_r (M×h_r), the partial (M×N) and this rank's rows of Y.
  peak.forward = m * k * s + hidden_bytes(c, r, m) + m * n * s_p + mr * n * s +
                 scratch16_forward(c, r, m) + scatter16(n);
  log.backward.push_back(all_gather_entry(c.backend, rows.scaled(k), r, es));
  log.backward.push_back(all_gather_entry(c.backend, rows.scaled(n), r, es));
  log.backward.push_back(reduce_scatter_entry(c.backend, rows.scaled(k), r, er));
  // Gathered X and dY, H_r and dA_r, dW_1,r and dW_2,r, the partial dX (M×K) and this rank's rows.
  peak.backward = m * k * s + m * n * s + 2 * hidden_bytes(c, r, m) + weight_bytes(c, r) +
                  m * k * s_p + mr * k * s + scratch16_backward(c, r, m) + scatter16(k);
  out.chains = chains(c, collective::reduce_scatter, collective::reduce_scatter);
  return out;
}

namespace {
// The full M×cols matrix whose rows part.M are spread over the ranks, this rank's rows given.
template <class T>
matrix<T> gathered(comm& world, const partition& rows, const matrix<T>& mine, std::size_t cols) {
  matrix<T> full(static_cast<std::size_t>(rows.length()), cols);
  std::copy(mine.data.begin(), mine.data.end(),
            full.row(static_cast<std::size_t>(rows.offset(world.rank()))));
  world.all_gather<T>(full.span(), rows, static_cast<std::int64_t>(cols));
  return full;
}
}  // namespace

void sequence_parallel_pair::forward(context& ctx, const run_case& c, const forward_io& io) const {
  io.visit_mixed([&]<class T>(const matrix<T>& x, weights<T> ws, matrix<T>& y) {
    comm& world = ctx.grid.axis(0);
    const int r = world.rank();
    const auto m = static_cast<std::size_t>(c.prob.M), n = static_cast<std::size_t>(c.prob.N);
    const partition& rows = c.part("M");
    const matrix<T> x_full = gathered<T>(world, rows, x, static_cast<std::size_t>(c.prob.K));
    matrix<T> h(m, static_cast<std::size_t>(c.part("H").size(r)));
    mem::tracked_vector<wide_t<T>> partial(m * n);
    forward_partial<T>(c, m, x_full.data.data(), ws, h.data.data(), partial.data());
    y = matrix<T>(static_cast<std::size_t>(rows.size(r)), n);
    mixed::reduce_scatter<T>(world, c, std::span<const wide_t<T>>(partial.data(), partial.size()),
                             y.span(), rows, static_cast<std::int64_t>(n));
  });
}

void sequence_parallel_pair::backward(context& ctx, const run_case& c,
                                      const backward_io& io) const {
  io.visit_mixed([&]<class T>(const matrix<T>& x, weights<T> ws, const matrix<T>& dy, matrix<T>& dx,
                              gradients<T> dws) {
    comm& world = ctx.grid.axis(0);
    const int r = world.rank();
    const auto m = static_cast<std::size_t>(c.prob.M), k = static_cast<std::size_t>(c.prob.K);
    const partition& rows = c.part("M");
    const matrix<T> x_full = gathered<T>(world, rows, x, k);
    const matrix<T> dy_full = gathered<T>(world, rows, dy, static_cast<std::size_t>(c.prob.N));
    const auto hr = static_cast<std::size_t>(c.part("H").size(r));
    matrix<T> h(m, hr), da(m, hr);
    mem::tracked_vector<wide_t<T>> dx_partial(m * k);
    backward_partial<T>(c, m, x_full.data.data(), ws, dy_full.data.data(), h.data.data(),
                        da.data.data(), dws, dx_partial.data());
    dx = matrix<T>(static_cast<std::size_t>(rows.size(r)), k);
    mixed::reduce_scatter<T>(world, c,
                             std::span<const wide_t<T>>(dx_partial.data(), dx_partial.size()),
                             dx.span(), rows, static_cast<std::int64_t>(k));
  });
}

}  // namespace shardcheck::par
