#include "strategies/column_parallel.hpp"

#include <algorithm>
#include <vector>

#include "shardcheck/reference/gemm.hpp"

namespace shardcheck::par {

std::string column_parallel::summary() const {
  return "W sharded by output features, X replicated; Y column blocks all-gathered (or left "
         "sharded); dX all-reduced";
}

std::vector<param_spec> column_parallel::params() const {
  return {{"gather", 0, 1, 1, "1: all-gather Y to every rank (R); 0: leave Y sharded (S(1))"}};
}

layout column_parallel::placement_of(tensor t, const run_case& c) const {
  // W is N×K (out_in) or K×N (in_out): its N dimension is rows or columns.
  const placement by_n = placement::S(c.prob.layout == weight_layout::out_in ? 0 : 1);
  switch (t) {
    case tensor::x:
    case tensor::dx: return {placement::R()};
    case tensor::w:
    case tensor::dw: return {by_n};
    case tensor::y: return {c.param("gather") != 0 ? placement::R() : placement::S(1)};
    case tensor::dy: return {placement::S(1)};
  }
  return {placement::R()};
}

cost_estimate column_parallel::cost(const run_case& c, std::span<const int> coords) const {
  const partition& cols = c.part("N");
  const int r = coords[0];
  const auto s = static_cast<std::int64_t>(size_of(c.prob.type));
  const std::int64_t m = c.prob.M, n = c.prob.N, k = c.prob.K;
  cost_estimate e;
  if (c.param("gather") != 0) {
    e.forward.push_back(all_gather_entry(c.backend, cols.scaled(m), r, size_of(c.prob.type)));
    // The packed buffer and Y (both M×N) while re-laying.
    e.peak_forward = 2 * m * n * s;
  } else {
    e.peak_forward = m * cols.size(r) * s;
  }
  e.backward.push_back(all_reduce_entry(c.backend, m * k, r, c.p, size_of(c.prob.type)));
  e.peak_backward = (m * k + cols.size(r) * k) * s;
  e.chains = {k, cols.max_size() + reduction_depth(c.backend, collective::all_reduce, c.p, m * k),
              m};
  return e;
}

template <class T>
void column_parallel::forward_t(context& ctx, const run_case& c, const matrix<T>& x,
                                const matrix<T>& w, matrix<T>& y) const {
  comm& world = ctx.grid.axis(0);
  const partition& cols = c.part("N");
  const int r = world.rank();
  const auto m = static_cast<std::size_t>(c.prob.M), k = static_cast<std::size_t>(c.prob.K);
  const auto mine = static_cast<std::size_t>(cols.size(r));
  if (c.param("gather") == 0) {
    y = matrix<T>(m, mine);
    ref::linear_forward<T>(c.prob.layout, m, mine, k, x.data.data(), w.data.data(), y.data.data());
    return;
  }
  // Rank q's M×n_q block sits at packed[M·offset_q, M·(offset_q + n_q)), row-major.
  const auto n = static_cast<std::size_t>(c.prob.N);
  mem::tracked_vector<T> packed(m * n);
  ref::linear_forward<T>(c.prob.layout, m, mine, k, x.data.data(), w.data.data(),
                         packed.data() + m * static_cast<std::size_t>(cols.offset(r)));
  world.all_gather<T>(std::span<T>(packed.data(), packed.size()),
                      cols, static_cast<std::int64_t>(m));
  y = matrix<T>(m, n);
  std::size_t at = 0;  // destination column of the next block
  for (int i = 0; i < world.size(); ++i) {
    const int q = defect_ == defect::reversed_order ? world.size() - 1 - i : i;
    const auto nq = static_cast<std::size_t>(cols.size(q));
    const T* block = packed.data() + m * static_cast<std::size_t>(cols.offset(q));
    for (std::size_t row = 0; row < m; ++row)
      std::copy_n(block + row * nq, nq, y.row(row) + at);
    at += nq;
  }
}

template <class T>
void column_parallel::backward_t(context& ctx, const run_case& c, const matrix<T>& x,
                                 const matrix<T>& w, const matrix<T>& dy, matrix<T>& dx,
                                 matrix<T>& dw) const {
  comm& world = ctx.grid.axis(0);
  const auto m = static_cast<std::size_t>(c.prob.M), k = static_cast<std::size_t>(c.prob.K);
  const auto mine = static_cast<std::size_t>(c.part("N").size(world.rank()));
  dx = matrix<T>(m, k);
  ref::linear_backward_dx<T>(c.prob.layout, m, mine, k, dy.data.data(), w.data.data(),
                             dx.data.data());
  world.all_reduce_sum<T>(dx.span());
  dw = matrix<T>(w.rows, w.cols);
  ref::linear_backward_dw<T>(c.prob.layout, m, mine, k, dy.data.data(), x.data.data(),
                             dw.data.data());
}

SHARDCHECK_INSTANTIATE_STRATEGY(column_parallel);

}  // namespace shardcheck::par
