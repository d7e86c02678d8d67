#include "strategies/column_row_pair.hpp"

namespace shardcheck::par {

column_row_pair::column_row_pair()
    : layer_pair("column_row_pair",
                 "two layers, W1 split on its outputs and W2 on its inputs (part.H), X and Y "
                 "replicated; Y all-reduced; dX all-reduced; dW1, dW2 sharded",
                 placement::R()) {}

claims column_row_pair::cost(const run_case& c, std::span<const int> coords) const {
  const int r = coords[0];
  const std::size_t es = size_of(c.prob.type), er = mixed::reduce_bytes(c);
  const auto s = static_cast<std::int64_t>(es);
  const std::int64_t m = c.prob.M, n = c.prob.N, k = c.prob.K;
  // A 16-bit case's f32 partials of Y and dX beside the outputs (mixed::partial).
  const std::int64_t wide = is_storage16(c.prob.type) ? 4 : 0;
  claims out;
  auto& log = out.collectives.emplace();
  auto& peak = out.peak.emplace();
  log.forward.push_back(all_reduce_entry(c.backend, m * n, r, c.p, er));
  // H_r (M×h_r) and Y (M×N, reduced in place).
  peak.forward = hidden_bytes(c, r, m) + m * n * (s + wide) + scratch16_forward(c, r, m);
  log.backward.push_back(all_reduce_entry(c.backend, m * k, r, c.p, er));
  // H_r and dA_r (M×h_r each), dW_1,r and dW_2,r, dX (M×K, reduced in place).
  peak.backward = 2 * hidden_bytes(c, r, m) + weight_bytes(c, r) + m * k * (s + wide) +
                  scratch16_backward(c, r, m);
  out.chains = chains(c, collective::all_reduce, collective::all_reduce);
  return out;
}

void column_row_pair::forward(context& ctx, const run_case& c, const forward_io& io) const {
  io.visit_mixed([&]<class T>(const matrix<T>& x, weights<T> ws, matrix<T>& y) {
    comm& world = ctx.grid.axis(0);
    const auto m = static_cast<std::size_t>(c.prob.M), n = static_cast<std::size_t>(c.prob.N);
    matrix<T> h(m, static_cast<std::size_t>(c.part("H").size(world.rank())));
    y = matrix<T>(m, n);
    mixed::partial<T> part(y);
    forward_partial<T>(c, m, x.data.data(), ws, h.data.data(), part.data());
    part.all_reduce(world, c);
  });
}

void column_row_pair::backward(context& ctx, const run_case& c, const backward_io& io) const {
  io.visit_mixed([&]<class T>(const matrix<T>& x, weights<T> ws, const matrix<T>& dy, matrix<T>& dx,
                              gradients<T> dws) {
    comm& world = ctx.grid.axis(0);
    const auto m = static_cast<std::size_t>(c.prob.M), k = static_cast<std::size_t>(c.prob.K);
    const auto hr = static_cast<std::size_t>(c.part("H").size(world.rank()));
    matrix<T> h(m, hr), da(m, hr);
    dx = matrix<T>(m, k);
    mixed::partial<T> part(dx);
    backward_partial<T>(c, m, x.data.data(), ws, dy.data.data(), h.data.data(), da.data.data(), dws,
                        part.data());
    part.all_reduce(world, c);
  });
}

}  // namespace shardcheck::par
