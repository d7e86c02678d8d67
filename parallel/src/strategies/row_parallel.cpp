#include "strategies/row_parallel.hpp"

#include <algorithm>

#include "shardcheck/reference/gemm.hpp"
#include "strategies/mixed_ops.hpp"

namespace shardcheck::par {

row_parallel::row_parallel() {
  info_.name = "row_parallel";
  info_.summary =
      "W sharded by input features, X by columns; partial Y all-reduced (or reduce-scattered "
      "by rows); dX, dW local";
  info_.params = {{"scatter", 0, 1, 0,
                   "0: all-reduce Y to every rank (R); 1: reduce-scatter Y by rows (S(0))"}};
  info_.dtypes.insert(info_.dtypes.end(), {dtype::bf16, dtype::f16});
  info_.policies = mixed::reducing_policies();
}

layout row_parallel::placement(tensor_slot t, const run_case& c) const {
  // W is N×K (out_in) or K×N (in_out): its K dimension is columns or rows.
  const par::placement by_k = placement::S(c.prob.layout == weight_layout::out_in ? 1 : 0);
  const par::placement out = c.param("scatter") != 0 ? placement::S(0) : placement::R();
  switch (t.t) {
    case tensor::x:
    case tensor::dx: return {placement::S(1)};
    case tensor::w:
    case tensor::dw: return {by_k};
    case tensor::y:
    case tensor::dy: return {out};
  }
  return {placement::R()};
}

claims row_parallel::cost(const run_case& c, std::span<const int> coords) const {
  const partition& ks = c.part("K");
  const int r = coords[0];
  const std::size_t es = size_of(c.prob.type), er = mixed::reduce_bytes(c);
  const auto s = static_cast<std::int64_t>(es);
  const std::int64_t m = c.prob.M, n = c.prob.N, kr = ks.size(r);
  const std::int64_t rows_r = c.param("scatter") != 0 ? c.part("M").size(r) : 0;
  // dX_r (M×k_r) and dW_r (k_r·N), the backward's outputs.
  const std::int64_t grads = (m * kr + kr * n) * s;
  claims out;
  auto& log = out.collectives.emplace();
  auto& peak = out.peak.emplace();
  if (c.param("scatter") != 0) {
    const partition& rows = c.part("M");
    log.forward.push_back(reduce_scatter_entry(c.backend, rows.scaled(n), r, er));
    // The M×N partial and this rank's rows of Y, both live during the collective.
    peak.forward = (m * n + rows.size(r) * n) * s;
    log.backward.push_back(all_gather_entry(c.backend, rows.scaled(n), r, es));
    // The gathered M×N dY, then with dX and dW.
    peak.backward = m * n * s + grads;
  } else {
    log.forward.push_back(all_reduce_entry(c.backend, m * n, r, c.p, er));
    peak.forward = m * n * s;
    peak.backward = grads;
  }
  if (is_storage16(c.prob.type)) {
    // Beside the 16-bit buffers: f32 copies of the inputs of one product and its f32 partial.
    const std::int64_t product = (m * kr + kr * n + m * n) * 4;
    peak.forward =
        (c.param("scatter") != 0 ? 0 : m * n * 2) + product +
        (c.param("scatter") != 0 ? rows_r * n * 2 + std::max(m * n * 2, rows_r * n * 4) : 0);
    peak.backward = (c.param("scatter") != 0 ? m * n * s : 0) + grads + product;
  }
  const collective reduction =
      c.param("scatter") != 0 ? collective::reduce_scatter : collective::all_reduce;
  const std::int64_t depth = reduction_depth(c.backend, reduction, c.p, m * n);
  out.chains = {{ks.max_size() + depth, n, m, {.y = depth}}};
  return out;
}

void row_parallel::forward(context& ctx, const run_case& c, const forward_io& io) const {
  io.visit_mixed([&]<class T>(const matrix<T>& x, weights<T> w, matrix<T>& y) {
    comm& world = ctx.grid.axis(0);
    const int r = world.rank();
    const auto m = static_cast<std::size_t>(c.prob.M), n = static_cast<std::size_t>(c.prob.N);
    const auto kr = static_cast<std::size_t>(c.part("K").size(r));
    if (c.param("scatter") == 0) {
      y = matrix<T>(m, n);
      mixed::partial<T> part(y);
      mixed::forward<T>(c.prob.layout, m, n, kr, x.data.data(), w[0].data.data(), part.data());
      part.all_reduce(world, c);
      return;
    }
    const partition& rows = c.part("M");
    mem::tracked_vector<wide_t<T>> partial(m * n);
    mixed::forward<T>(c.prob.layout, m, n, kr, x.data.data(), w[0].data.data(), partial.data());
    y = matrix<T>(static_cast<std::size_t>(rows.size(r)), n);
    mixed::reduce_scatter<T>(world, c, std::span<const wide_t<T>>(partial.data(), partial.size()),
                             y.span(), rows, static_cast<std::int64_t>(n));
  });
}

void row_parallel::backward(context& ctx, const run_case& c, const backward_io& io) const {
  io.visit_mixed([&]<class T>(const matrix<T>& x, weights<T> w, const matrix<T>& dy, matrix<T>& dx,
                              gradients<T> dw) {
    comm& world = ctx.grid.axis(0);
    const int r = world.rank();
    const auto m = static_cast<std::size_t>(c.prob.M), n = static_cast<std::size_t>(c.prob.N);
    const auto kr = static_cast<std::size_t>(c.part("K").size(r));
    const T* full_dy = dy.data.data();
    matrix<T> gathered;
    if (c.param("scatter") != 0) {
      const partition& rows = c.part("M");
      gathered = matrix<T>(m, n);
      std::copy(dy.data.begin(), dy.data.end(),
                gathered.row(static_cast<std::size_t>(rows.offset(r))));
      world.all_gather<T>(gathered.span(), rows, static_cast<std::int64_t>(n));
      full_dy = gathered.data.data();
    }
    dx = matrix<T>(m, kr);
    {
      mixed::partial<T> part(dx);
      mixed::backward_dx<T>(c.prob.layout, m, n, kr, full_dy, w[0].data.data(), part.data());
      part.round();
    }
    dw[0] = matrix<T>(w[0].rows, w[0].cols);
    mixed::partial<T> part(dw[0]);
    mixed::backward_dw<T>(c.prob.layout, m, n, kr, full_dy, x.data.data(), part.data());
    part.round();
  });
}

}  // namespace shardcheck::par
