#include "strategies/data_parallel.hpp"

#include <algorithm>
#include <vector>

#include "shardcheck/reference/gemm.hpp"

namespace shardcheck::par {

std::string data_parallel::summary() const {
  return "X sharded by rows, W replicated; Y all-gathered in rank order (or left sharded); "
         "dW all-reduced";
}

std::vector<param_spec> data_parallel::params() const {
  return {{"gather", 0, 1, 1, "1: all-gather Y to every rank (R); 0: leave Y sharded (S(0))"}};
}

layout data_parallel::placement_of(tensor t, const run_case& c) const {
  switch (t) {
    case tensor::w:
    case tensor::dw: return {placement::R()};
    case tensor::y: return {c.param("gather") != 0 ? placement::R() : placement::S(0)};
    default: return {placement::S(0)};
  }
}

cost_estimate data_parallel::cost(const run_case& c, std::span<const int> coords) const {
  const partition& rows = c.part("M");
  const int r = coords[0];
  const auto s = static_cast<std::int64_t>(size_of(c.prob.type));
  const std::int64_t n = c.prob.N, k = c.prob.K;
  cost_estimate e;
  if (c.param("gather") != 0) {
    e.forward.push_back(all_gather_entry(c.backend, rows.scaled(n), r, size_of(c.prob.type)));
    e.peak_forward = c.prob.M * n * s;
  } else {
    e.peak_forward = rows.size(r) * n * s;
  }
  e.backward.push_back(all_reduce_entry(c.backend, n * k, r, c.p, size_of(c.prob.type)));
  e.peak_backward = (rows.size(r) * k + n * k) * s;
  e.chains = {k, n,
              rows.max_size() + reduction_depth(c.backend, collective::all_reduce, c.p, n * k)};
  return e;
}

namespace {
template <class T>
void local_forward(weight_layout l, std::size_t rows, std::size_t n, std::size_t k, const T* x,
                   const T* w, T* y, bool in_float) {
  if (!in_float) {
    ref::linear_forward<T>(l, rows, n, k, x, w, y);
    return;
  }
  std::vector<float> xf(x, x + rows * k), wf(w, w + n * k), yf(rows * n);
  ref::linear_forward<float>(l, rows, n, k, xf.data(), wf.data(), yf.data());
  std::copy(yf.begin(), yf.end(), y);
}
}  // namespace

template <class T>
void data_parallel::forward_t(context& ctx, const run_case& c, const matrix<T>& x,
                              const matrix<T>& w, matrix<T>& y) const {
  comm& world = ctx.grid.axis(0);
  const partition& rows = c.part("M");
  const int r = world.rank();
  const auto n = static_cast<std::size_t>(c.prob.N), k = static_cast<std::size_t>(c.prob.K);
  const bool gather = c.param("gather") != 0;
  const bool in_float = defect_ == defect::float_compute;
  if (defect_ == defect::copies_w) {
    std::vector<T> spare(w.data.begin(), w.data.end());
    ref::linear_forward<T>(c.prob.layout, x.rows, n, k, x.data.data(), spare.data(),
                           std::vector<T>(x.rows * n).data());
  }
  y = matrix<T>(gather ? static_cast<std::size_t>(c.prob.M) : x.rows, n);
  T* mine = gather ? y.row(static_cast<std::size_t>(rows.offset(r))) : y.data.data();
  if (!(defect_ == defect::drop_last_shard && r == world.size() - 1))
    local_forward<T>(c.prob.layout, x.rows, n, k, x.data.data(), w.data.data(), mine, in_float);
  if (!gather || (defect_ == defect::rank0_skips_gather && r == 0)) return;
  world.all_gather<T>(y.span(), rows, static_cast<std::int64_t>(n));
  if (defect_ == defect::reversed_order) {
    matrix<T> swapped(y.rows, n);
    std::int64_t at = 0;
    for (int q = world.size() - 1; q >= 0; --q) {
      std::copy_n(y.row(static_cast<std::size_t>(rows.offset(q))), rows.size(q) * c.prob.N,
                  swapped.row(static_cast<std::size_t>(at)));
      at += rows.size(q);
    }
    y = std::move(swapped);
  }
}

template <class T>
void data_parallel::backward_t(context& ctx, const run_case& c, const matrix<T>& x,
                               const matrix<T>& w, const matrix<T>& dy, matrix<T>& dx,
                               matrix<T>& dw) const {
  comm& world = ctx.grid.axis(0);
  const auto n = static_cast<std::size_t>(c.prob.N), k = static_cast<std::size_t>(c.prob.K);
  dx = matrix<T>(x.rows, k);
  ref::linear_backward_dx<T>(c.prob.layout, x.rows, n, k, dy.data.data(), w.data.data(),
                             dx.data.data());
  dw = matrix<T>(w.rows, w.cols);
  if (defect_ == defect::order_alternates && calls_++ % 2 == 1 && x.rows > 1) {
    // Sums the local rows as two halves, second half first: another order on every other call.
    const std::size_t half = x.rows / 2;
    ref::linear_backward_dw<T>(c.prob.layout, x.rows - half, n, k, dy.row(half), x.row(half),
                               dw.data.data());
    ref::linear_backward_dw<T>(c.prob.layout, half, n, k, dy.data.data(), x.data.data(),
                               dw.data.data(), true);
  } else {
    ref::linear_backward_dw<T>(c.prob.layout, x.rows, n, k, dy.data.data(), x.data.data(),
                               dw.data.data());
  }
  if (defect_ == defect::extra_barrier) world.barrier();
  if (defect_ == defect::rank_order_sum) {
    // Every rank gathers all partials and adds them starting from its own: replicas drift apart.
    const auto p = static_cast<std::size_t>(world.size());
    const std::size_t nk = dw.data.size();
    matrix<T> all(p, nk);
    std::copy(dw.data.begin(), dw.data.end(), all.row(static_cast<std::size_t>(world.rank())));
    world.all_gather<T>(all.span(), std::vector<std::int64_t>(p, static_cast<std::int64_t>(nk)));
    for (std::size_t i = 0; i < nk; ++i) {
      T sum = 0;
      for (std::size_t q = 0; q < p; ++q)
        sum += all.row((static_cast<std::size_t>(world.rank()) + q) % p)[i];
      dw.data[i] = sum;
    }
    return;
  }
  if (defect_ == defect::rank0_waits_forever && world.rank() == 0 && world.size() > 1) {
    T never{};
    check_mpi(MPI_Recv(&never, 1, mpi_type<T>(), 1, 99, world.native_handle(), MPI_STATUS_IGNORE),
              "MPI_Recv");
  }
  const bool skip = defect_ == defect::no_dw_all_reduce;
  if (!skip) world.all_reduce_sum<T>(dw.span());
}

SHARDCHECK_INSTANTIATE_STRATEGY(data_parallel);

}  // namespace shardcheck::par
