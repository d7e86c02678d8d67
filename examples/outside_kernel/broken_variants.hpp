// Three defects a raw-MPI kernel can have, each a kernel that must fail (negative tests in
// CMakeLists.txt). Their outputs are right wherever they are produced; what is wrong is what
// shardcheck measures: the collectives issued, the ranks' agreement on them, the memory.
#pragma once
#include <cmath>
#include <variant>

#include "raw_data_parallel.hpp"

namespace mylab {

// Backward adds one MPI_Allreduce the claims do not name (a count of non-finite gradients): the
// ledger property fails.
class extra_allreduce final : public raw_data_parallel {
 public:
  extra_allreduce() : raw_data_parallel("raw_data_parallel.extra_allreduce") {}
  void backward(sc::context& ctx, const sc::run_case& c, const sc::backward_io& io) const override {
    raw_data_parallel::backward(ctx, c, io);
    int nonfinite = 0;
    for (const sc::any_matrix& dw : io.dws)
      std::visit(
          [&](const auto& m) {
            for (const auto v : m.data) nonfinite += std::isfinite(v) ? 0 : 1;
          },
          dw);
    MPI_Allreduce(MPI_IN_PLACE, &nonfinite, 1, MPI_INT, MPI_SUM, ctx.grid.axis(0).native_handle());
  }
};

// With two ranks or more, the last one skips the forward MPI_Allgatherv: the ranks disagree on a
// collective, which must be reported as an error within seconds, not end in the watchdog.
class skips_allgatherv final : public raw_data_parallel {
 public:
  skips_allgatherv() : raw_data_parallel("raw_data_parallel.skips_allgatherv") {}
  void forward(sc::context& ctx, const sc::run_case& c, const sc::forward_io& io) const override {
    io.visit([&]<class T>(const sc::matrix<T>& x, sc::weights<T> w, sc::matrix<T>& y) {
      const MPI_Comm world = ctx.grid.axis(0).native_handle();
      int rank = 0, size = 1;
      MPI_Comm_rank(world, &rank);
      MPI_Comm_size(world, &size);
      const sc::partition& rows = c.part("M");
      const auto n = static_cast<std::size_t>(c.prob.N), k = static_cast<std::size_t>(c.prob.K);
      y = sc::matrix<T>(static_cast<std::size_t>(c.prob.M), n);
      shardcheck::ref::linear_forward<T>(c.prob.layout, x.rows, n, k, x.data.data(),
                                         w[0].data.data(),
                                         y.row(static_cast<std::size_t>(rows.offset(rank))));
      if (size == 1 || rank != size - 1) all_gather_rows(world, rows, c.prob.N, y);
    });
  }
};

// Forward multiplies by a std::vector copy of W, a buffer the claimed peak leaves out: the memory
// property fails in a program linking shardcheck::shardcheck, whose operator-new hook counts
// std::vector; without the hook, memory is `not measured`.
class copies_w final : public raw_data_parallel {
 public:
  copies_w() : raw_data_parallel("raw_data_parallel.copies_w") {}
  void forward(sc::context& ctx, const sc::run_case& c, const sc::forward_io& io) const override {
    io.visit([&]<class T>(const sc::matrix<T>& x, sc::weights<T> w, sc::matrix<T>& y) {
      const MPI_Comm world = ctx.grid.axis(0).native_handle();
      int rank = 0;
      MPI_Comm_rank(world, &rank);
      const sc::partition& rows = c.part("M");
      const auto n = static_cast<std::size_t>(c.prob.N), k = static_cast<std::size_t>(c.prob.K);
      const std::vector<T> w_copy(w[0].data.begin(), w[0].data.end());
      y = sc::matrix<T>(static_cast<std::size_t>(c.prob.M), n);
      shardcheck::ref::linear_forward<T>(c.prob.layout, x.rows, n, k, x.data.data(), w_copy.data(),
                                         y.row(static_cast<std::size_t>(rows.offset(rank))));
      all_gather_rows(world, rows, c.prob.N, y);
    });
  }
};

}  // namespace mylab
