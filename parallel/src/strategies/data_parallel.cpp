#include "strategies/data_parallel.hpp"

#include <algorithm>

#include "shardcheck/reference/gemm.hpp"
#include "strategies/mixed_ops.hpp"

namespace shardcheck::par {

data_parallel::data_parallel() {
  info_.name = "data_parallel";
  info_.summary =
      "X sharded by rows, W replicated; Y all-gathered in rank order (or left sharded); "
      "dW all-reduced";
  info_.params = {
      {"gather", 0, 1, 1, "1: all-gather Y to every rank (R); 0: leave Y sharded (S(0))"}};
  info_.dtypes.insert(info_.dtypes.end(), {dtype::bf16, dtype::f16});
  info_.policies = mixed::reducing_policies();
}

layout data_parallel::placement(tensor_slot t, const run_case& c) const {
  switch (t.t) {
    case tensor::w:
    case tensor::dw: return {placement::R()};
    case tensor::y: return {c.param("gather") != 0 ? placement::R() : placement::S(0)};
    default: return {placement::S(0)};
  }
}

claims data_parallel::cost(const run_case& c, std::span<const int> coords) const {
  const partition& rows = c.part("M");
  const int r = coords[0];
  const std::size_t es = size_of(c.prob.type);
  const auto s = static_cast<std::int64_t>(es);
  const std::int64_t n = c.prob.N, k = c.prob.K;
  claims out;
  auto& log = out.collectives.emplace();
  auto& peak = out.peak.emplace();
  if (c.param("gather") != 0) {
    log.forward.push_back(all_gather_entry(c.backend, rows.scaled(n), r, es));
    peak.forward = c.prob.M * n * s;
  } else {
    peak.forward = rows.size(r) * n * s;
  }
  log.backward.push_back(all_reduce_entry(c.backend, n * k, r, c.p, mixed::reduce_bytes(c)));
  peak.backward = (rows.size(r) * k + n * k) * s;
  if (is_storage16(c.prob.type)) {
    // f32 copies of one product's inputs and its f32 partial (X_r, W or dY_r, and dX_r or dW).
    const std::int64_t mr = rows.size(r);
    peak.forward += (mr * k + n * k + mr * n) * 4;
    peak.backward += (mr * n + std::max(n * k, mr * k) + std::max(mr * k, n * k)) * 4;
  }
  const std::int64_t depth = reduction_depth(c.backend, collective::all_reduce, c.p, n * k);
  out.chains = {{k, n, rows.max_size() + depth, {.dw = depth}}};
  return out;
}

void data_parallel::forward(context& ctx, const run_case& c, const forward_io& io) const {
  io.visit_mixed([&]<class T>(const matrix<T>& x, weights<T> w, matrix<T>& y) {
    comm& world = ctx.grid.axis(0);
    const partition& rows = c.part("M");
    const auto n = static_cast<std::size_t>(c.prob.N), k = static_cast<std::size_t>(c.prob.K);
    const bool gather = c.param("gather") != 0;
    y = matrix<T>(gather ? static_cast<std::size_t>(c.prob.M) : x.rows, n);
    T* mine = gather ? y.row(static_cast<std::size_t>(rows.offset(world.rank()))) : y.data.data();
    if constexpr (is_16bit_v<T>) {
      mem::tracked_vector<float> part(x.rows * n);
      mixed::forward<T>(c.prob.layout, x.rows, n, k, x.data.data(), w[0].data.data(), part.data());
      ref::narrow<T>(part.data(), part.size(), mine);
    } else {
      ref::linear_forward<T>(c.prob.layout, x.rows, n, k, x.data.data(), w[0].data.data(), mine);
    }
    if (gather) world.all_gather<T>(y.span(), rows, static_cast<std::int64_t>(n));
  });
}

void data_parallel::backward(context& ctx, const run_case& c, const backward_io& io) const {
  io.visit_mixed([&]<class T>(const matrix<T>& x, weights<T> w, const matrix<T>& dy, matrix<T>& dx,
                              gradients<T> dw) {
    const auto n = static_cast<std::size_t>(c.prob.N), k = static_cast<std::size_t>(c.prob.K);
    dx = matrix<T>(x.rows, k);
    {
      mixed::partial<T> part(dx);
      mixed::backward_dx<T>(c.prob.layout, x.rows, n, k, dy.data.data(), w[0].data.data(),
                            part.data());
      part.round();
    }
    dw[0] = matrix<T>(w[0].rows, w[0].cols);
    mixed::partial<T> part(dw[0]);
    mixed::backward_dw<T>(c.prob.layout, x.rows, n, k, dy.data.data(), x.data.data(), part.data());
    part.all_reduce(ctx.grid.axis(0), c);
  });
}

}  // namespace shardcheck::par
