#include "checks/overlap_check.hpp"

#include <algorithm>

#include "shardcheck/reference/gemm.hpp"

namespace shardcheck::prop::checks {
using namespace par;

namespace {
bool reduce_scatters(const run_case& c) { return c.param("dw") == 0; }
const partition& weight_rows(const run_case& c) {
  return c.part(dim_names(tensor::w, c.prob).first);
}
// Y's row windows: [0, h) and [h, M).
std::int64_t half(const run_case& c) { return c.prob.M / 2; }

// f(first, count) over this rank's rows in [lo, hi) (global indices), in four chunks or fewer,
// letting the pending collective move on after each.
template <class F>
void in_chunks(comm& world, const partition& rows, std::int64_t lo, std::int64_t hi, F f) {
  const int r = world.rank();
  const std::int64_t a = std::max(lo, rows.offset(r));
  const std::int64_t b = std::min(hi, rows.offset(r) + rows.size(r));
  const std::int64_t chunk = std::max<std::int64_t>(1, (b - a + 3) / 4);
  for (std::int64_t i = a; i < b; i += chunk) {
    f(i, std::min(chunk, b - i));
    world.test_pending();
  }
}

// dX = dY·W over this rank's rows, in chunks, while the started collective runs; then its wait.
template <class T>
void overlap_dx(comm& world, const run_case& c, const matrix<T>& w, const matrix<T>& dy,
                matrix<T>& dx) {
  const partition& rows = c.part("M");
  const auto n = static_cast<std::size_t>(c.prob.N), k = static_cast<std::size_t>(c.prob.K);
  const auto mine = rows.offset(world.rank());
  dx = matrix<T>(dy.rows, k);
  in_chunks(world, rows, 0, c.prob.M, [&](std::int64_t i, std::int64_t count) {
    const auto local = static_cast<std::size_t>(i - mine);
    ref::linear_backward_dx<T>(c.prob.layout, static_cast<std::size_t>(count), n, k, dy.row(local),
                               w.data.data(), dx.row(local));
  });
  world.wait_pending();
}
}  // namespace

overlap_check::overlap_check() {
  info_.name = "collective.overlap";
  info_.summary =
      "pseudo-strategy: non-blocking all-gather of Y (two windows), reduce-scatter or "
      "all-reduce of dW, each overlapped with the rank's GEMMs";
  info_.params = {
      {"dw", 0, 1, 0, "0: dW reduce-scattered to W's row owners (S(0)); 1: all-reduced (R)"}};
}

layout overlap_check::placement(tensor_slot t, const run_case& c) const {
  switch (t.t) {
    case tensor::w:
    case tensor::y: return {placement::R()};
    case tensor::dw: return {reduce_scatters(c) ? placement::S(0) : placement::R()};
    default: return {placement::S(0)};
  }
}

claims overlap_check::cost(const run_case& c, std::span<const int> coords) const {
  const int r = coords[0];
  const partition& rows = c.part("M");
  const std::size_t es = size_of(c.prob.type);
  const auto s = static_cast<std::int64_t>(es);
  const std::int64_t m = c.prob.M, n = c.prob.N, k = c.prob.K, nk = n * k;
  const std::int64_t cols = dim_length(c.prob, dim_names(tensor::w, c.prob).second);
  const auto window = [&](std::int64_t lo, std::int64_t hi) {
    std::vector<std::int64_t> counts;
    for (int q = 0; q < c.p; ++q)
      counts.push_back(
          std::max<std::int64_t>(
              std::min(hi, rows.offset(q) + rows.size(q)) - std::max(lo, rows.offset(q)), 0) *
          n);
    return counts;
  };
  claims out;
  auto& log = out.collectives.emplace();
  auto& peak = out.peak.emplace();
  log.forward.push_back(all_gather_entry(c.backend, window(0, half(c)), r, es));
  log.forward.push_back(all_gather_entry(c.backend, window(half(c), m), r, es));
  peak.forward = m * n * s;
  const collective dw_kind =
      reduce_scatters(c) ? collective::reduce_scatter : collective::all_reduce;
  if (reduce_scatters(c)) {
    const partition& wrows = weight_rows(c);
    log.backward.push_back(reduce_scatter_entry(c.backend, wrows.scaled(cols), r, es));
    peak.backward = (rows.size(r) * k + nk + wrows.size(r) * cols) * s;
  } else {
    log.backward.push_back(all_reduce_entry(c.backend, nk, r, c.p, es));
    peak.backward = (rows.size(r) * k + nk) * s;
  }
  out.chains = {{k, n, rows.max_size() + reduction_depth(c.backend, dw_kind, c.p, nk)}};
  return out;
}

void overlap_check::forward(context& ctx, const run_case& c, const forward_io& io) const {
  io.visit([&]<class T>(const matrix<T>& x, weights<T> w, matrix<T>& y) {
    comm& world = ctx.grid.axis(0);
    const partition& rows = c.part("M");
    const auto n = static_cast<std::size_t>(c.prob.N), k = static_cast<std::size_t>(c.prob.K);
    const auto mine = rows.offset(world.rank());
    y = matrix<T>(static_cast<std::size_t>(c.prob.M), n);
    const auto compute = [&](std::int64_t lo, std::int64_t hi) {
      in_chunks(world, rows, lo, hi, [&](std::int64_t i, std::int64_t count) {
        ref::linear_forward<T>(c.prob.layout, static_cast<std::size_t>(count), n, k,
                               x.row(static_cast<std::size_t>(i - mine)), w[0].data.data(),
                               y.row(static_cast<std::size_t>(i)));
      });
    };
    const auto gather = [&](std::int64_t lo, std::int64_t hi) {
      world.start_all_gather<T>(
          std::span<T>(y.data.data() + lo * c.prob.N, static_cast<std::size_t>((hi - lo)) * n),
          world.window_counts(rows, lo, hi, c.prob.N));
    };
    compute(0, half(c));
    gather(0, half(c));
    compute(half(c), c.prob.M);
    world.wait_pending();
    gather(half(c), c.prob.M);
    world.wait_pending();
  });
}

void overlap_check::backward(context& ctx, const run_case& c, const backward_io& io) const {
  io.visit([&]<class T>(const matrix<T>& x, weights<T> ws, const matrix<T>& dy, matrix<T>& dx,
                        gradients<T> dws) {
    comm& world = ctx.grid.axis(0);
    const matrix<T>& w = ws[0];
    matrix<T>& dw = dws[0];
    const auto n = static_cast<std::size_t>(c.prob.N), k = static_cast<std::size_t>(c.prob.K);
    if (reduce_scatters(c)) {
      const partition& wrows = weight_rows(c);
      matrix<T> partial(w.rows, w.cols);
      ref::linear_backward_dw<T>(c.prob.layout, x.rows, n, k, dy.data.data(), x.data.data(),
                                 partial.data.data());
      dw = matrix<T>(static_cast<std::size_t>(wrows.size(world.rank())), w.cols);
      world.start_reduce_scatter_sum<T>(
          partial.span(), dw.span(),
          world.window_counts(wrows, 0, wrows.length(), static_cast<std::int64_t>(w.cols)));
      overlap_dx(world, c, w, dy, dx);
      return;
    }
    dw = matrix<T>(w.rows, w.cols);
    ref::linear_backward_dw<T>(c.prob.layout, x.rows, n, k, dy.data.data(), x.data.data(),
                               dw.data.data());
    world.start_all_reduce_sum<T>(dw.span());
    overlap_dx(world, c, w, dy, dx);
  });
}

}  // namespace shardcheck::prop::checks
