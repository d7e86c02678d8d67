// Kernels for the tests of the invariance property (invariance.hpp): data parallel (X, Y, dY, dX
// split by rows, W and dW on every rank), every sum written out as a loop.
//   fixed_order   each element of Y and dX is its sum over k (over j) in index order, and dW's
//                 sum over the batch runs in global row order through the ranks: rank 0 adds its
//                 rows to zero, sends the running sum to rank 1, which adds its rows, and so on;
//                 the last rank broadcasts it (plain MPI calls). Every sum is the one-device
//                 loop's, whatever p, the split and its parameter `pieces` (below): it claims
//                 invariance across p, partition, backend and `pieces`, and holds it.
//   partial_sums  the same, except that each rank first sums its own rows from zero (in
//                 `pieces` groups, each from zero) and the partial sums are then added in rank
//                 order: dW's grouping, and so its last bits, follow p, the split and `pieces`.
//                 It makes the same claims (fixed_order's include `pieces`, which it ignores)
//                 and must fail them.
//   gathered_sums each rank's partial dW all-gathered through shardcheck's comm (data moved, not
//                 added) and summed in rank order on every rank: its bits follow p, not the
//                 backend or the collective's algorithm. It claims backend invariance alone.
//   reduced_sums  the partial dW all-reduced through the comm: the backend's algorithm (ring,
//                 tree, the MPI library's) orders the sum. The same claim, which it must fail.
// Only the chains are claimed (Y: K, dX: N, dW: M through the ranks, or a rank's rows + p − 1).
// With INVARIANT_KERNELS_VERSION=2 in the environment, fixed_order sums as partial_sums does: the
// next version of a kernel whose bits change while every bound holds, for the tests of verify
// --baseline.
#include <mpi.h>

#include <shardcheck/cli.hpp>
#include <shardcheck/parallel/kernel.hpp>

#include <algorithm>
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

// How dW's sum over the batch crosses the ranks.
enum class across { chained, partial_chained, gathered, reduced };

class row_loops final : public sc::kernel {
 public:
  row_loops(std::string name, across how) : how_(how) {
    info_.name = std::move(name);
    switch (how) {
      case across::chained:
        info_.summary = "every sum in global index order, through the ranks";
        break;
      case across::partial_chained:
        info_.summary = "dW summed per rank, then the partial sums in rank order";
        break;
      case across::gathered:
        info_.summary = "dW summed per rank, all-gathered, then summed in rank order";
        break;
      case across::reduced: info_.summary = "dW summed per rank, then all-reduced"; break;
    }
    const bool raw = how == across::chained || how == across::partial_chained;
    info_.uses_collectives = !raw;
    info_.invariant.backend = true;
    info_.invariant.workers = info_.invariant.partition = raw;
    if (raw) {
      info_.params = {{"pieces", 1, 4, 1, "groups of rows each rank sums dW over in turn"}};
      info_.invariant.params = {"pieces"};
    }
  }
  const sc::kernel_info& info() const override { return info_; }

  sc::layout placement(sc::tensor_slot t, const sc::run_case&) const override {
    const bool whole = t.t == sc::tensor::w || t.t == sc::tensor::dw;
    return {whole ? sc::placement::R() : sc::placement::S(0)};
  }

  sc::claims cost(const sc::run_case& c, std::span<const int>) const override {
    sc::claims out;
    // dW: one chain of M through the ranks, or a rank's rows and then p − 1 additions.
    const std::int64_t dw = how_ == across::chained ? c.prob.M : c.part("M").max_size() + c.p - 1;
    out.chains = std::vector<sc::chain_lengths>{{c.prob.K, c.prob.N, dw}};
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
      sc::comm& axis = ctx.grid.axis(0);
      const int p = axis.size(), me = axis.rank();
      const std::size_t size = dw.data.size();
      std::vector<T> mine(size, T{0});
      T* into = how_ == across::chained ? dw.data.data() : mine.data();
      const int count = static_cast<int>(size);
      const bool raw = how_ == across::chained || how_ == across::partial_chained;
      if (raw && me > 0)
        MPI_Recv(dw.data.data(), count, type_of<T>(), me - 1, 9, axis.native_handle(),
                 MPI_STATUS_IGNORE);
      // In `pieces` groups of rows: chained adds each group's rows to the running sum (the same
      // sum whatever the groups); the others sum a group from zero, then add it.
      const auto pieces =
          how_ == across::partial_chained ? static_cast<std::size_t>(c.param("pieces")) : 1;
      std::vector<T> piece(size);
      for (std::size_t q = 0; q < pieces; ++q) {
        T* sum = pieces == 1 ? into : piece.data();
        std::fill(piece.begin(), piece.end(), T{0});
        for (std::size_t i = x.rows * q / pieces; i < x.rows * (q + 1) / pieces; ++i)
          for (std::size_t j = 0; j < n; ++j)
            for (std::size_t l = 0; l < k; ++l)
              sum[out_in ? j * k + l : l * n + j] += dy.row(i)[j] * x.row(i)[l];
        if (pieces > 1)
          for (std::size_t e = 0; e < size; ++e) into[e] += piece[e];
      }
      switch (how_) {
        case across::chained: break;
        case across::partial_chained:
          for (std::size_t e = 0; e < size; ++e)
            dw.data[e] = me == 0 ? mine[e] : dw.data[e] + mine[e];
          break;
        case across::gathered: {
          sc::matrix<T> all(static_cast<std::size_t>(p), size);
          std::copy(mine.begin(), mine.end(), all.row(static_cast<std::size_t>(me)));
          axis.all_gather<T>(all.span(), sc::partition::balanced(p, p), count);
          for (std::size_t e = 0; e < size; ++e) {
            T sum = 0;
            for (std::size_t q = 0; q < static_cast<std::size_t>(p); ++q) sum += all.row(q)[e];
            dw.data[e] = sum;
          }
          return;
        }
        case across::reduced:
          std::copy(mine.begin(), mine.end(), dw.data.begin());
          axis.all_reduce_sum<T>(dw.span());
          return;
      }
      if (me + 1 < p)
        MPI_Send(dw.data.data(), count, type_of<T>(), me + 1, 9, axis.native_handle());
      MPI_Bcast(dw.data.data(), count, type_of<T>(), p - 1, axis.native_handle());
    });
  }

 private:
  across how_;
  sc::kernel_info info_;
};

}  // namespace

int main(int argc, char** argv) {
  const char* version = std::getenv("INVARIANT_KERNELS_VERSION");
  const bool second = version != nullptr && std::string_view(version) == "2";
  sc::registry mine;
  mine.add(std::make_unique<row_loops>("fixed_order",
                                       second ? across::partial_chained : across::chained));
  mine.add(std::make_unique<row_loops>("partial_sums", across::partial_chained));
  mine.add(std::make_unique<row_loops>("gathered_sums", across::gathered));
  mine.add(std::make_unique<row_loops>("reduced_sums", across::reduced));
  return shardcheck::cli_main(argc, argv, std::move(mine));
}
