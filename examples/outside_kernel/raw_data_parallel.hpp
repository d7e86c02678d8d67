// A data-parallel linear layer written with plain MPI calls, as a kernel of one's own project:
// X split by rows, W replicated; forward MPI_Allgatherv's the rows of Y, backward MPI_Allreduce's
// dW. shardcheck records both calls (through the MPI profiling interface) and checks them
// against the claims of cost().
#pragma once
#include <mpi.h>

#include <shardcheck/parallel/kernel.hpp>
#include <shardcheck/reference/gemm.hpp>
#include <string>
#include <type_traits>
#include <vector>

namespace mylab {
namespace sc = shardcheck::par;

template <class T>
[[nodiscard]] MPI_Datatype mpi_type() {
  return std::is_same_v<T, float> ? MPI_FLOAT : MPI_DOUBLE;
}

// Every rank's rows of y (rows.size(r) of them at rows.offset(r)) to every rank, in place: e.g.
// rows 2,0,1 of n = 4 columns are counts 8,0,4 at displacements 0,8,8.
template <class T>
void all_gather_rows(MPI_Comm world, const sc::partition& rows, std::int64_t n, sc::matrix<T>& y) {
  std::vector<int> counts(static_cast<std::size_t>(rows.parts())), displs(counts.size());
  for (int r = 0; r < rows.parts(); ++r) {
    counts[static_cast<std::size_t>(r)] = static_cast<int>(rows.size(r) * n);
    displs[static_cast<std::size_t>(r)] = static_cast<int>(rows.offset(r) * n);
  }
  MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, y.data.data(), counts.data(), displs.data(),
                 mpi_type<T>(), world);
}

class raw_data_parallel : public sc::kernel {
 public:
  explicit raw_data_parallel(std::string name = "raw_data_parallel") {
    info_.name = std::move(name);
    info_.summary = "X split by rows, W replicated; MPI_Allgatherv of Y, MPI_Allreduce of dW";
  }
  const sc::kernel_info& info() const override { return info_; }

  sc::layout placement(sc::tensor_slot t, const sc::run_case&) const override {
    const bool replicated = t.t == sc::tensor::w || t.t == sc::tensor::dw || t.t == sc::tensor::y;
    return {replicated ? sc::placement::R() : sc::placement::S(0)};
  }

  // Plain MPI calls are Open MPI's built-ins whatever the case's backend, so the claims take the
  // `mpi` formulas: the logical payload, and a reduction order of depth p − 1.
  sc::claims cost(const sc::run_case& c, std::span<const int> coords) const override {
    const sc::partition& rows = c.part("M");
    const std::size_t es = shardcheck::size_of(c.prob.type);
    const std::int64_t n = c.prob.N, k = c.prob.K, s = static_cast<std::int64_t>(es);
    const auto ints = static_cast<std::int64_t>(2 * c.p * sizeof(int));  // counts, displacements
    sc::claims out;
    out.collectives = sc::claims::collective_claim{
        {sc::all_gather_entry(sc::backend::mpi, rows.scaled(n), coords[0], es)},
        {sc::all_reduce_entry(sc::backend::mpi, n * k, coords[0], c.p, es)}};
    out.peak =
        sc::claims::peak_claim{c.prob.M * n * s + ints, (rows.size(coords[0]) * k + n * k) * s};
    const auto depth =
        sc::reduction_depth(sc::backend::mpi, sc::collective::all_reduce, c.p, n * k);
    out.chains = std::vector<sc::chain_lengths>{{k, n, rows.max_size() + depth}};
    return out;
  }

  void forward(sc::context& ctx, const sc::run_case& c, const sc::forward_io& io) const override {
    io.visit([&]<class T>(const sc::matrix<T>& x, sc::weights<T> w, sc::matrix<T>& y) {
      const MPI_Comm world = ctx.grid.axis(0).native_handle();
      int rank = 0;
      MPI_Comm_rank(world, &rank);
      const sc::partition& rows = c.part("M");
      const auto n = static_cast<std::size_t>(c.prob.N), k = static_cast<std::size_t>(c.prob.K);
      y = sc::matrix<T>(static_cast<std::size_t>(c.prob.M), n);
      shardcheck::ref::linear_forward<T>(c.prob.layout, x.rows, n, k, x.data.data(),
                                         w[0].data.data(),
                                         y.row(static_cast<std::size_t>(rows.offset(rank))));
      all_gather_rows(world, rows, c.prob.N, y);
    });
  }

  void backward(sc::context& ctx, const sc::run_case& c, const sc::backward_io& io) const override {
    io.visit([&]<class T>(const sc::matrix<T>& x, sc::weights<T> w, const sc::matrix<T>& dy,
                          sc::matrix<T>& dx, sc::gradients<T> dw) {
      const MPI_Comm world = ctx.grid.axis(0).native_handle();
      const auto n = static_cast<std::size_t>(c.prob.N), k = static_cast<std::size_t>(c.prob.K);
      dx = sc::matrix<T>(x.rows, k);
      shardcheck::ref::linear_backward_dx<T>(c.prob.layout, x.rows, n, k, dy.data.data(),
                                             w[0].data.data(), dx.data.data());
      dw[0] = sc::matrix<T>(w[0].rows, w[0].cols);
      shardcheck::ref::linear_backward_dw<T>(c.prob.layout, x.rows, n, k, dy.data.data(),
                                             x.data.data(), dw[0].data.data());
      MPI_Allreduce(MPI_IN_PLACE, dw[0].data.data(), static_cast<int>(n * k), mpi_type<T>(),
                    MPI_SUM, world);
    });
  }

 private:
  sc::kernel_info info_;
};
}  // namespace mylab
