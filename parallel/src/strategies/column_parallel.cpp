#include "strategies/column_parallel.hpp"

#include <algorithm>

#include "shardcheck/reference/gemm.hpp"
#include "strategies/mixed_ops.hpp"

namespace shardcheck::par {

column_parallel::column_parallel() {
  info_.name = "column_parallel";
  info_.summary =
      "W sharded by output features, X replicated; Y column blocks all-gathered (or left "
      "sharded); dX all-reduced";
  info_.params = {
      {"gather", 0, 1, 1, "1: all-gather Y to every rank (R); 0: leave Y sharded (S(1))"}};
  info_.dtypes.insert(info_.dtypes.end(), {dtype::bf16, dtype::f16});
  info_.policies = mixed::reducing_policies();
}

layout column_parallel::placement(tensor_slot t, const run_case& c) const {
  // W is N×K (out_in) or K×N (in_out): its N dimension is rows or columns.
  const par::placement by_n = placement::S(c.prob.layout == weight_layout::out_in ? 0 : 1);
  switch (t.t) {
    case tensor::x:
    case tensor::dx: return {placement::R()};
    case tensor::w:
    case tensor::dw: return {by_n};
    case tensor::y: return {c.param("gather") != 0 ? placement::R() : placement::S(1)};
    case tensor::dy: return {placement::S(1)};
  }
  return {placement::R()};
}

claims column_parallel::cost(const run_case& c, std::span<const int> coords) const {
  const partition& cols = c.part("N");
  const int r = coords[0];
  const std::size_t es = size_of(c.prob.type);
  const auto s = static_cast<std::int64_t>(es);
  const std::int64_t m = c.prob.M, n = c.prob.N, k = c.prob.K;
  claims out;
  auto& log = out.collectives.emplace();
  auto& peak = out.peak.emplace();
  if (c.param("gather") != 0) {
    log.forward.push_back(all_gather_entry(c.backend, cols.scaled(m), r, es));
    // The packed buffer and Y (both M×N) while re-laying.
    peak.forward = 2 * m * n * s;
  } else {
    peak.forward = m * cols.size(r) * s;
  }
  log.backward.push_back(all_reduce_entry(c.backend, m * k, r, c.p, mixed::reduce_bytes(c)));
  peak.backward = (m * k + cols.size(r) * k) * s;
  if (is_storage16(c.prob.type)) {
    // f32 copies of one product's inputs and its f32 partial.
    const std::int64_t nr = cols.size(r);
    peak.forward += (m * k + nr * k + m * nr) * 4;
    peak.backward += (m * nr + std::max(nr * k, m * k) + std::max(m * k, nr * k)) * 4;
  }
  const std::int64_t depth = reduction_depth(c.backend, collective::all_reduce, c.p, m * k);
  out.chains = {{k, cols.max_size() + depth, m, {.dx = depth}}};
  return out;
}

void column_parallel::forward(context& ctx, const run_case& c, const forward_io& io) const {
  io.visit_mixed([&]<class T>(const matrix<T>& x, weights<T> w, matrix<T>& y) {
    comm& world = ctx.grid.axis(0);
    const partition& cols = c.part("N");
    const int r = world.rank();
    const auto m = static_cast<std::size_t>(c.prob.M), k = static_cast<std::size_t>(c.prob.K);
    const auto mine = static_cast<std::size_t>(cols.size(r));
    // This rank's M×n_r block at `out`, through an f32 partial for a 16-bit T.
    const auto local = [&](T* out) {
      if constexpr (is_16bit_v<T>) {
        mem::tracked_vector<float> part(m * mine);
        mixed::forward<T>(c.prob.layout, m, mine, k, x.data.data(), w[0].data.data(), part.data());
        ref::narrow<T>(part.data(), part.size(), out);
      } else {
        ref::linear_forward<T>(c.prob.layout, m, mine, k, x.data.data(), w[0].data.data(), out);
      }
    };
    if (c.param("gather") == 0) {
      y = matrix<T>(m, mine);
      local(y.data.data());
      return;
    }
    // Rank q's M×n_q block sits at packed[M·offset_q, M·(offset_q + n_q)), row-major.
    const auto n = static_cast<std::size_t>(c.prob.N);
    // Written whole (this rank's block by the product, the others by the gather), so not zeroed.
    mem::scratch_vector<T> packed(m * n);
    local(packed.data() + m * static_cast<std::size_t>(cols.offset(r)));
    world.all_gather<T>(std::span<T>(packed.data(), packed.size()), cols,
                        static_cast<std::int64_t>(m));
    y = matrix<T>(m, n);
    std::size_t at = 0;  // destination column of the next block
    for (int q = 0; q < world.size(); ++q) {
      const auto nq = static_cast<std::size_t>(cols.size(q));
      const T* block = packed.data() + m * static_cast<std::size_t>(cols.offset(q));
      for (std::size_t row = 0; row < m; ++row) std::copy_n(block + row * nq, nq, y.row(row) + at);
      at += nq;
    }
  });
}

void column_parallel::backward(context& ctx, const run_case& c, const backward_io& io) const {
  io.visit_mixed([&]<class T>(const matrix<T>& x, weights<T> w, const matrix<T>& dy, matrix<T>& dx,
                              gradients<T> dw) {
    comm& world = ctx.grid.axis(0);
    const auto m = static_cast<std::size_t>(c.prob.M), k = static_cast<std::size_t>(c.prob.K);
    const auto mine = static_cast<std::size_t>(c.part("N").size(world.rank()));
    dx = matrix<T>(m, k);
    {
      mixed::partial<T> part(dx);
      mixed::backward_dx<T>(c.prob.layout, m, mine, k, dy.data.data(), w[0].data.data(),
                            part.data());
      part.all_reduce(world, c);
    }
    dw[0] = matrix<T>(w[0].rows, w[0].cols);
    mixed::partial<T> part(dw[0]);
    mixed::backward_dw<T>(c.prob.layout, m, mine, k, dy.data.data(), x.data.data(), part.data());
    part.round();
  });
}

}  // namespace shardcheck::par
