#include "checks/collective_check.hpp"

#include <algorithm>
#include <vector>

#include "shardcheck/reference/gemm.hpp"

namespace shardcheck::prop::checks {
using namespace par;

namespace {
int root_of(const run_case& c) { return static_cast<int>(c.param("root") % c.p); }

// all-to-all counts for rank r: send rows_r·cols_q, receive rows_q·cols_r.
struct a2a_counts {
  std::vector<std::int64_t> send, recv;
};
a2a_counts counts_of(const run_case& c, int r) {
  const partition& rows = c.part("M");
  const partition& cols = c.part("N");
  a2a_counts out;
  out.send.reserve(static_cast<std::size_t>(c.p));
  out.recv.reserve(static_cast<std::size_t>(c.p));
  for (int q = 0; q < c.p; ++q) {
    out.send.push_back(rows.size(r) * cols.size(q));
    out.recv.push_back(rows.size(q) * cols.size(r));
  }
  return out;
}
}  // namespace

collective_check::collective_check(collective kind) : kind_(kind) {
  if (kind != collective::broadcast && kind != collective::all_to_all)
    throw invalid_problem("collective_check: only broadcast and all_to_all");
  info_.name = "collective." + std::string(to_string(kind));
  if (is_broadcast()) {
    info_.summary =
        "pseudo-strategy: the root computes Y, dX, dW and broadcasts them (dX started, while the "
        "root computes dW)";
    info_.params = {{"root", 0, 3, 0, "broadcast root (mod p)"}};
  } else {
    info_.summary = "pseudo-strategy: Y computed by rows, all-to-all'd to columns; dW all-reduced";
  }
}

layout collective_check::placement(tensor_slot t, const run_case& /*c*/) const {
  if (is_broadcast()) return {placement::R()};
  switch (t.t) {
    case tensor::x:
    case tensor::dx: return {placement::S(0)};
    case tensor::y: return {placement::S(1)};
    default: return {placement::R()};
  }
}

claims collective_check::cost(const run_case& c, std::span<const int> coords) const {
  const int r = coords[0];
  const std::size_t es = size_of(c.prob.type);
  const auto s = static_cast<std::int64_t>(es);
  const std::int64_t m = c.prob.M, n = c.prob.N, k = c.prob.K;
  claims out;
  auto& log = out.collectives.emplace();
  auto& peak = out.peak.emplace();
  if (is_broadcast()) {
    const int root = root_of(c);
    log.forward.push_back(broadcast_entry(c.backend, m * n, root, r, c.p, es));
    log.backward.push_back(broadcast_entry(c.backend, m * k, root, r, c.p, es));
    log.backward.push_back(broadcast_entry(c.backend, n * k, root, r, c.p, es));
    peak.forward = m * n * s;
    peak.backward = (m * k + n * k) * s;
    out.chains = {{k, n, m}};
    return out;
  }
  const partition& rows = c.part("M");
  const partition& cols = c.part("N");
  const a2a_counts counts = counts_of(c, r);
  log.forward.push_back(all_to_all_entry(c.backend, counts.send, counts.recv, r, es));
  log.backward.push_back(all_reduce_entry(c.backend, n * k, r, c.p, es));
  // Local rows of Y and their packed copy, Y's column block, and the two count vectors.
  const auto count_bytes = 2 * c.p * static_cast<std::int64_t>(sizeof(std::int64_t));
  peak.forward = (2 * rows.size(r) * n + m * cols.size(r)) * s + count_bytes;
  peak.backward = (rows.size(r) * k + n * k) * s;
  const std::int64_t depth = reduction_depth(c.backend, collective::all_reduce, c.p, n * k);
  out.chains = {{k, n, rows.max_size() + depth}};
  return out;
}

void collective_check::forward(context& ctx, const run_case& c, const forward_io& io) const {
  io.visit([&]<class T>(const matrix<T>& x, weights<T> w, matrix<T>& y) {
    comm& world = ctx.grid.axis(0);
    const int r = world.rank();
    const auto m = static_cast<std::size_t>(c.prob.M), n = static_cast<std::size_t>(c.prob.N),
               k = static_cast<std::size_t>(c.prob.K);
    if (is_broadcast()) {
      y = matrix<T>(m, n);
      const int root = root_of(c);
      if (r == root)
        ref::linear_forward<T>(c.prob.layout, m, n, k, x.data.data(), w[0].data.data(),
                               y.data.data());
      world.broadcast<T>(y.span(), root);
      return;
    }
    const partition& cols = c.part("N");
    matrix<T> local(x.rows, n);
    ref::linear_forward<T>(c.prob.layout, x.rows, n, k, x.data.data(), w[0].data.data(),
                           local.data.data());
    matrix<T> packed(x.rows, n);
    T* at = packed.data.data();
    for (int q = 0; q < c.p; ++q)
      for (std::size_t i = 0; i < x.rows; ++i) {
        at = std::copy_n(local.row(i) + cols.offset(q), cols.size(q), at);
      }
    const a2a_counts counts = counts_of(c, r);
    y = matrix<T>(m, static_cast<std::size_t>(cols.size(r)));
    world.all_to_all<T>(packed.span(), counts.send, y.span(), counts.recv);
  });
}

void collective_check::backward(context& ctx, const run_case& c, const backward_io& io) const {
  io.visit([&]<class T>(const matrix<T>& x, weights<T> w, const matrix<T>& dy, matrix<T>& dx,
                        gradients<T> dw) {
    comm& world = ctx.grid.axis(0);
    const int r = world.rank();
    const auto n = static_cast<std::size_t>(c.prob.N), k = static_cast<std::size_t>(c.prob.K);
    if (is_broadcast()) {
      const auto m = static_cast<std::size_t>(c.prob.M);
      const int root = root_of(c);
      dx = matrix<T>(m, k);
      dw[0] = matrix<T>(w[0].rows, w[0].cols);
      if (r == root)
        ref::linear_backward_dx<T>(c.prob.layout, m, n, k, dy.data.data(), w[0].data.data(),
                                   dx.data.data());
      // dX travels (the started form) while the root computes dW.
      world.start_broadcast<T>(dx.span(), root);
      if (r == root)
        ref::linear_backward_dw<T>(c.prob.layout, m, n, k, dy.data.data(), x.data.data(),
                                   dw[0].data.data());
      world.wait_pending();
      world.broadcast<T>(dw[0].span(), root);
      return;
    }
    const auto offset = static_cast<std::size_t>(c.part("M").offset(r));
    dx = matrix<T>(x.rows, k);
    ref::linear_backward_dx<T>(c.prob.layout, x.rows, n, k, dy.row(offset), w[0].data.data(),
                               dx.data.data());
    dw[0] = matrix<T>(w[0].rows, w[0].cols);
    ref::linear_backward_dw<T>(c.prob.layout, x.rows, n, k, dy.row(offset), x.data.data(),
                               dw[0].data.data());
    world.all_reduce_sum<T>(dw[0].span());
  });
}

}  // namespace shardcheck::prop::checks
