#include "strategies/row_parallel.hpp"

#include <algorithm>
#include <vector>

#include "shardcheck/reference/gemm.hpp"

namespace shardcheck::par {

std::string row_parallel::summary() const {
  return "W sharded by input features, X by columns; partial Y all-reduced (or reduce-scattered "
         "by rows); dX, dW local";
}

std::vector<param_spec> row_parallel::params() const {
  return {{"scatter", 0, 1, 0,
           "0: all-reduce Y to every rank (R); 1: reduce-scatter Y by rows (S(0))"}};
}

layout row_parallel::placement_of(tensor t, const run_case& c) const {
  // W is N×K (out_in) or K×N (in_out): its K dimension is columns or rows.
  const placement by_k = placement::S(c.prob.layout == weight_layout::out_in ? 1 : 0);
  const placement out = c.param("scatter") != 0 ? placement::S(0) : placement::R();
  switch (t) {
    case tensor::x:
    case tensor::dx: return {placement::S(1)};
    case tensor::w:
    case tensor::dw: return {by_k};
    case tensor::y:
    case tensor::dy: return {out};
  }
  return {placement::R()};
}

cost_estimate row_parallel::cost(const run_case& c, std::span<const int> coords) const {
  const partition& ks = c.part("K");
  const int r = coords[0];
  const auto s = static_cast<std::int64_t>(size_of(c.prob.type));
  const std::int64_t m = c.prob.M, n = c.prob.N, kr = ks.size(r);
  // dX_r (M×k_r) and dW_r (k_r·N), the backward's outputs.
  const std::int64_t grads = (m * kr + kr * n) * s;
  cost_estimate e;
  if (c.param("scatter") != 0) {
    const partition& rows = c.part("M");
    e.forward.push_back(reduce_scatter_entry(c.backend, rows.scaled(n), r, size_of(c.prob.type)));
    // The M×N partial and this rank's rows of Y, both live during the collective.
    e.peak_forward = (m * n + rows.size(r) * n) * s;
    e.backward.push_back(all_gather_entry(c.backend, rows.scaled(n), r, size_of(c.prob.type)));
    // The gathered M×N dY, then with dX and dW.
    e.peak_backward = m * n * s + grads;
  } else {
    e.forward.push_back(all_reduce_entry(c.backend, m * n, r, c.p, size_of(c.prob.type)));
    e.peak_forward = m * n * s;
    e.peak_backward = grads;
  }
  const collective reduction =
      c.param("scatter") != 0 ? collective::reduce_scatter : collective::all_reduce;
  e.chains = {ks.max_size() + reduction_depth(c.backend, reduction, c.p, m * n), n, m};
  return e;
}

template <class T>
void row_parallel::forward_t(context& ctx, const run_case& c, const matrix<T>& x,
                             const matrix<T>& w, matrix<T>& y) const {
  comm& world = ctx.grid.axis(0);
  const int r = world.rank();
  const auto m = static_cast<std::size_t>(c.prob.M), n = static_cast<std::size_t>(c.prob.N);
  const auto kr = static_cast<std::size_t>(c.part("K").size(r));
  const bool reduce = defect_ != defect::no_reduction;
  if (c.param("scatter") == 0) {
    y = matrix<T>(m, n);
    ref::linear_forward<T>(c.prob.layout, m, n, kr, x.data.data(), w.data.data(), y.data.data());
    if (reduce) world.all_reduce_sum<T>(y.span());
    return;
  }
  const partition& rows = c.part("M");
  mem::tracked_vector<T> partial(m * n);
  ref::linear_forward<T>(c.prob.layout, m, n, kr, x.data.data(), w.data.data(), partial.data());
  y = matrix<T>(static_cast<std::size_t>(rows.size(r)), n);
  if (reduce) {
    world.reduce_scatter_sum<T>(std::span<const T>(partial.data(), partial.size()), y.span(),
                                rows, static_cast<std::int64_t>(n));
  } else {
    std::copy_n(partial.data() + static_cast<std::size_t>(rows.offset(r)) * n, y.data.size(),
                y.data.data());
  }
}

template <class T>
void row_parallel::backward_t(context& ctx, const run_case& c, const matrix<T>& x,
                              const matrix<T>& w, const matrix<T>& dy, matrix<T>& dx,
                              matrix<T>& dw) const {
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
  ref::linear_backward_dx<T>(c.prob.layout, m, n, kr, full_dy, w.data.data(), dx.data.data());
  dw = matrix<T>(w.rows, w.cols);
  ref::linear_backward_dw<T>(c.prob.layout, m, n, kr, full_dy, x.data.data(), dw.data.data());
}

SHARDCHECK_INSTANTIATE_STRATEGY(row_parallel);

}  // namespace shardcheck::par
