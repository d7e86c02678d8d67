#include "strategies/redistribute_layer.hpp"

#include <algorithm>
#include <utility>

#include "shardcheck/parallel/redistribute.hpp"
#include "shardcheck/reference/gemm.hpp"

namespace shardcheck::par {

namespace {

enum class source { r, s0, s1, p };

source src_of(const run_case& c) { return static_cast<source>(c.param("src")); }

placement y_source(source s) {
  switch (s) {
    case source::r: return placement::R();
    case source::s0: return placement::S(0);
    case source::s1: return placement::S(1);
    case source::p: return placement::P();
  }
  return placement::R();
}

placement y_target(const run_case& c) {
  const auto d = c.param("dst");
  return d == 0 ? placement::R() : placement::S(static_cast<int>(d - 1));
}

// The layout of dY that the local gradients of each source need.
placement dy_needed(source s) { return s == source::p ? placement::R() : y_source(s); }

const partition* part_or_null(const run_case& c, const char* key) {
  const auto it = c.parts.find(key);
  return it == c.parts.end() ? nullptr : &it->second;
}

global_shape y_shape(const run_case& c) {
  return {c.prob.M, c.prob.N, part_or_null(c, "M"), part_or_null(c, "N")};
}

// W (or dW) as a whole matrix, for the P → R reduction of dW.
global_shape w_shape(const run_case& c) {
  const bool out_in = c.prob.layout == weight_layout::out_in;
  return {out_in ? c.prob.N : c.prob.K, out_in ? c.prob.K : c.prob.N, nullptr, nullptr};
}

global_shape x_shape(const run_case& c) { return {c.prob.M, c.prob.K, nullptr, nullptr}; }

// This rank's share of M, N and K in the local products of source s.
struct local_dims {
  std::int64_t m, n, k;
};
local_dims local_of(const run_case& c, source s, int r) {
  local_dims d{c.prob.M, c.prob.N, c.prob.K};
  if (s == source::s0) d.m = c.part("M").size(r);
  if (s == source::s1) d.n = c.part("N").size(r);
  if (s == source::p) d.k = c.part("K").size(r);
  return d;
}

}  // namespace

redistribute_layer::redistribute_layer() {
  info_.name = "redistribute";
  info_.summary =
      "Y computed in layout src (R, S(0), S(1) or P) and redistributed to dst (R, S(0), S(1)) "
      "with the minimal collective; backward mirrored";
  info_.params = {{"src", 0, 3, 3, "layout Y is computed in: 0 R, 1 S(0), 2 S(1), 3 P (K split)"},
                  {"dst", 0, 2, 1, "layout Y is redistributed to: 0 R, 1 S(0), 2 S(1)"}};
}

layout redistribute_layer::placement(tensor_slot t, const run_case& c) const {
  const bool out_in = c.prob.layout == weight_layout::out_in;
  const source s = src_of(c);
  switch (t.t) {
    case tensor::x:
    case tensor::dx:
      return {s == source::s0  ? placement::S(0)
              : s == source::p ? placement::S(1)
                               : placement::R()};
    case tensor::w:
    case tensor::dw:
      if (s == source::s1) return {placement::S(out_in ? 0 : 1)};
      if (s == source::p) return {placement::S(out_in ? 1 : 0)};
      return {placement::R()};
    case tensor::y:
    case tensor::dy: return {y_target(c)};
  }
  return {placement::R()};
}

claims redistribute_layer::cost(const run_case& c, std::span<const int> coords) const {
  const int r = coords[0];
  const source s = src_of(c);
  const auto bytes = static_cast<std::int64_t>(size_of(c.prob.type));
  const local_dims d = local_of(c, s, r);
  const global_shape gy = y_shape(c);
  claims out;
  auto& log = out.collectives.emplace();
  auto& peak = out.peak.emplace();
  const auto cost_of = [&](const global_shape& g, par::placement from, par::placement to) {
    return redistribution_cost_of(g, from, to, r, c.p, c.prob.type, c.backend);
  };

  const redistribution_cost fwd = cost_of(gy, y_source(s), y_target(c));
  log.forward = fwd.entries;
  peak.forward = d.m * d.n * bytes + fwd.peak_bytes;  // the local Y, then the redistribution

  const redistribution_cost dy = cost_of(gy, y_target(c), dy_needed(s));
  log.backward = dy.entries;
  const auto [dy_rows, dy_cols] = local_extent(gy, dy_needed(s), r);
  // The redistributed dY, then the local dX (d.m×d.k) and dW (d.n×d.k), one of them partial.
  std::int64_t local = (dy_rows * dy_cols + d.m * d.k + d.n * d.k) * bytes;
  if (s == source::s0 || s == source::s1) {
    const redistribution_cost red =
        cost_of(s == source::s0 ? w_shape(c) : x_shape(c), placement::P(), placement::R());
    log.backward.insert(log.backward.end(), red.entries.begin(), red.entries.end());
    local += red.peak_bytes;
  }
  peak.backward = std::max(dy.peak_bytes, local);

  // The one reduction each output may go through: Y (P → R or S), dX over N, dW over M.
  const auto depth = [&](collective kind, std::int64_t count) {
    return reduction_depth(c.backend, kind, c.p, count);
  };
  const collective y_kind = y_target(c).what == placement::kind::replicate
                                ? collective::all_reduce
                                : collective::reduce_scatter;
  const std::int64_t m = c.prob.M, n = c.prob.N, k = c.prob.K;
  out.chains = {
      {s == source::p ? c.part("K").max_size() + depth(y_kind, m * n) : k,
       s == source::s1 ? c.part("N").max_size() + depth(collective::all_reduce, m * k) : n,
       s == source::s0 ? c.part("M").max_size() + depth(collective::all_reduce, n * k) : m}};
  return out;
}

void redistribute_layer::forward(context& ctx, const run_case& c, const forward_io& io) const {
  io.visit([&]<class T>(const matrix<T>& x, weights<T> w, matrix<T>& y) {
    comm& world = ctx.grid.axis(0);
    const source s = src_of(c);
    const local_dims d = local_of(c, s, world.rank());
    matrix<T> local(static_cast<std::size_t>(d.m), static_cast<std::size_t>(d.n));
    ref::linear_forward<T>(c.prob.layout, local.rows, local.cols, static_cast<std::size_t>(d.k),
                           x.data.data(), w[0].data.data(), local.data.data());
    y = redistribute<T>(world, local, y_shape(c), y_source(s), y_target(c));
  });
}

void redistribute_layer::backward(context& ctx, const run_case& c, const backward_io& io) const {
  io.visit([&]<class T>(const matrix<T>& x, weights<T> ws, const matrix<T>& dy, matrix<T>& dx,
                        gradients<T> dws) {
    comm& world = ctx.grid.axis(0);
    const matrix<T>& w = ws[0];
    const source s = src_of(c);
    const local_dims d = local_of(c, s, world.rank());
    const auto m = static_cast<std::size_t>(d.m), n = static_cast<std::size_t>(d.n),
               k = static_cast<std::size_t>(d.k);
    const matrix<T> g = redistribute<T>(world, dy, y_shape(c), y_target(c), dy_needed(s));
    matrix<T> dx_local(m, k);
    ref::linear_backward_dx<T>(c.prob.layout, m, n, k, g.data.data(), w.data.data(),
                               dx_local.data.data());
    matrix<T> dw_local(w.rows, w.cols);
    ref::linear_backward_dw<T>(c.prob.layout, m, n, k, g.data.data(), x.data.data(),
                               dw_local.data.data());
    if (s == source::s1)
      dx = redistribute<T>(world, dx_local, x_shape(c), placement::P(), placement::R());
    else
      dx = std::move(dx_local);
    if (s == source::s0)
      dws[0] = redistribute<T>(world, dw_local, w_shape(c), placement::P(), placement::R());
    else
      dws[0] = std::move(dw_local);
  });
}

}  // namespace shardcheck::par
