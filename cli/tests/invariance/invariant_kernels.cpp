// Kernels for the tests of the invariance property (invariance.hpp): data parallel with plain MPI
// calls (X, Y, dY, dX split by rows, W and dW on every rank), every sum written out as a loop.
//   fixed_order   each element of Y and dX is its sum over k (over j) in index order, and dW's
//                 sum over the batch runs in global row order through the ranks: rank 0 adds its
//                 rows to zero, sends the running sum to rank 1, which adds its rows, and so on;
//                 the last rank broadcasts it. Every sum is the one-device loop's, whatever p and
//                 the split: it claims invariance across p, partition and backend, and holds it.
//   partial_sums  the same, except that each rank first sums its own rows from zero and the
//                 partial sums are then added in rank order: dW's grouping, and so its last bits,
//                 follow p and the split. It makes the same claim and must fail it.
// Only the chains are claimed (Y: K, dX: N, dW: M). With INVARIANT_KERNELS_VERSION=2 in the
// environment, fixed_order sums as partial_sums does: the next version of a kernel whose bits
// change while every bound holds, for the tests of verify --baseline.
#include <mpi.h>

#include <shardcheck/cli.hpp>
#include <shardcheck/parallel/kernel.hpp>

#include <cstddef>
#include <cstdlib>
#include <string_view>
#include <type_traits>
#include <vector>

namespace {
namespace sc = shardcheck::par;

template <class T>
MPI_Datatype type_of() {
  return std::is_same_v<T, float> ? MPI_FLOAT : MPI_DOUBLE;
}

class row_loops final : public sc::kernel {
 public:
  row_loops(std::string name, bool fixed) : fixed_(fixed) {
    info_.name = std::move(name);
    info_.summary = fixed ? "every sum in global index order, through the ranks"
                          : "dW summed per rank, then the partial sums in rank order";
    info_.uses_collectives = false;
    info_.invariant.workers = info_.invariant.partition = info_.invariant.backend = true;
  }
  const sc::kernel_info& info() const override { return info_; }

  sc::layout placement(sc::tensor_slot t, const sc::run_case&) const override {
    const bool whole = t.t == sc::tensor::w || t.t == sc::tensor::dw;
    return {whole ? sc::placement::R() : sc::placement::S(0)};
  }

  sc::claims cost(const sc::run_case& c, std::span<const int>) const override {
    sc::claims out;
    out.chains = std::vector<sc::chain_lengths>{{c.prob.K, c.prob.N, c.prob.M}};
    return out;
  }

  void forward(sc::context&, const sc::run_case& c, const sc::forward_io& io) const override {
    io.visit([&]<class T>(const sc::matrix<T>& x, sc::weights<T> w, sc::matrix<T>& y) {
      const bool out_in = c.prob.layout == shardcheck::weight_layout::out_in;
      const auto n = static_cast<std::size_t>(c.prob.N), k = static_cast<std::size_t>(c.prob.K);
      y = sc::matrix<T>(x.rows, n);
      for (std::size_t i = 0; i < x.rows; ++i)
        for (std::size_t j = 0; j < n; ++j) {
          T sum = 0;
          for (std::size_t l = 0; l < k; ++l)
            sum += x.row(i)[l] * (out_in ? w[0].row(j)[l] : w[0].row(l)[j]);
          y.row(i)[j] = sum;
        }
    });
  }

  void backward(sc::context& ctx, const sc::run_case& c, const sc::backward_io& io) const override {
    io.visit([&]<class T>(const sc::matrix<T>& x, sc::weights<T> w, const sc::matrix<T>& dy,
                          sc::matrix<T>& dx, sc::gradients<T> dws) {
      const bool out_in = c.prob.layout == shardcheck::weight_layout::out_in;
      const auto n = static_cast<std::size_t>(c.prob.N), k = static_cast<std::size_t>(c.prob.K);
      dx = sc::matrix<T>(x.rows, k);
      for (std::size_t i = 0; i < x.rows; ++i)
        for (std::size_t l = 0; l < k; ++l) {
          T sum = 0;
          for (std::size_t j = 0; j < n; ++j)
            sum += dy.row(i)[j] * (out_in ? w[0].row(j)[l] : w[0].row(l)[j]);
          dx.row(i)[l] = sum;
        }
      // dW(j, l) = Σ_i dY(i, j)·X(i, l), at (j, l) for out_in and (l, j) for in_out.
      sc::matrix<T>& dw = dws[0];
      dw = sc::matrix<T>(w[0].rows, w[0].cols);
      MPI_Comm axis = ctx.grid.axis(0).native_handle();
      int p = 0, me = 0;
      MPI_Comm_size(axis, &p);
      MPI_Comm_rank(axis, &me);
      const int count = static_cast<int>(dw.data.size());
      std::vector<T> mine(dw.data.size(), T{0});
      T* into = fixed_ ? dw.data.data() : mine.data();
      if (me > 0)
        MPI_Recv(dw.data.data(), count, type_of<T>(), me - 1, 9, axis, MPI_STATUS_IGNORE);
      for (std::size_t i = 0; i < x.rows; ++i)
        for (std::size_t j = 0; j < n; ++j)
          for (std::size_t l = 0; l < k; ++l)
            into[out_in ? j * k + l : l * n + j] += dy.row(i)[j] * x.row(i)[l];
      if (!fixed_)
        for (std::size_t e = 0; e < mine.size(); ++e)
          dw.data[e] = me == 0 ? mine[e] : dw.data[e] + mine[e];
      if (me + 1 < p) MPI_Send(dw.data.data(), count, type_of<T>(), me + 1, 9, axis);
      MPI_Bcast(dw.data.data(), count, type_of<T>(), p - 1, axis);
    });
  }

 private:
  bool fixed_;
  sc::kernel_info info_;
};

}  // namespace

int main(int argc, char** argv) {
  const char* version = std::getenv("INVARIANT_KERNELS_VERSION");
  const bool second = version != nullptr && std::string_view(version) == "2";
  sc::registry mine;
  mine.add(std::make_unique<row_loops>("fixed_order", !second));
  mine.add(std::make_unique<row_loops>("partial_sums", false));
  return shardcheck::cli_main(argc, argv, std::move(mine));
}
