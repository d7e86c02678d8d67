// Kernels whose failure comes and goes, for the tests of `verify --reruns` (driver.hpp): data
// parallel with plain MPI calls (X split by rows, W replicated; Y all-gathered), dW summed on
// rank 0 and broadcast.
//   arrival_order  rank 0 adds the other ranks' partial dW in the order their messages arrive
//                  (MPI_Recv from MPI_ANY_SOURCE): with three ranks or more the order, and so
//                  dW's last bits, change from run to run, and `determinism` fails in some runs.
//                  Each rank waits 0–500 µs before it sends, as the noise of a loaded machine
//                  would make it, so that the order changes from run to run at every size, a
//                  small case's too (the second run's stir, pmpi.hpp's perturbation, is the
//                  same in every re-run of a case, one send a run: alone, it fails a case in every
//                  re-run or none)
//   rank_order     the same sums in rank order: deterministic, every property holds
// Only the chains are claimed (Y: K, dX: N, dW: the longest row share + p − 1 additions).
#include <mpi.h>

#include <shardcheck/cli.hpp>
#include <shardcheck/parallel/kernel.hpp>
#include <shardcheck/reference/gemm.hpp>

#include <chrono>
#include <random>
#include <thread>
#include <type_traits>
#include <vector>

namespace {
namespace sc = shardcheck::par;

template <class T>
MPI_Datatype type_of() {
  return std::is_same_v<T, float> ? MPI_FLOAT : MPI_DOUBLE;
}

class summed_on_root final : public sc::kernel {
 public:
  summed_on_root(std::string name, bool arrival) : arrival_(arrival) {
    info_.name = std::move(name);
    info_.summary = arrival ? "dW summed on rank 0 in message-arrival order"
                            : "dW summed on rank 0 in rank order";
  }
  const sc::kernel_info& info() const override { return info_; }

  sc::layout placement(sc::tensor_slot t, const sc::run_case&) const override {
    const bool replicated = t.t == sc::tensor::w || t.t == sc::tensor::dw || t.t == sc::tensor::y;
    return {replicated ? sc::placement::R() : sc::placement::S(0)};
  }

  sc::claims cost(const sc::run_case& c, std::span<const int>) const override {
    sc::claims out;
    out.chains =
        std::vector<sc::chain_lengths>{{c.prob.K, c.prob.N, c.part("M").max_size() + c.p - 1}};
    return out;
  }

  void forward(sc::context& ctx, const sc::run_case& c, const sc::forward_io& io) const override {
    io.visit([&]<class T>(const sc::matrix<T>& x, sc::weights<T> w, sc::matrix<T>& y) {
      MPI_Comm axis = ctx.grid.axis(0).native_handle();
      int p = 0, me = 0;
      MPI_Comm_size(axis, &p);
      MPI_Comm_rank(axis, &me);
      const sc::partition& rows = c.part("M");
      const auto n = static_cast<std::size_t>(c.prob.N), k = static_cast<std::size_t>(c.prob.K);
      y = sc::matrix<T>(static_cast<std::size_t>(c.prob.M), n);
      shardcheck::ref::linear_forward<T>(c.prob.layout, x.rows, n, k, x.data.data(),
                                         w[0].data.data(),
                                         y.row(static_cast<std::size_t>(rows.offset(me))));
      std::vector<int> counts(static_cast<std::size_t>(p)), displs(counts.size());
      for (int r = 0; r < p; ++r) {
        counts[static_cast<std::size_t>(r)] = static_cast<int>(rows.size(r) * c.prob.N);
        displs[static_cast<std::size_t>(r)] = static_cast<int>(rows.offset(r) * c.prob.N);
      }
      MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, y.data.data(), counts.data(),
                     displs.data(), type_of<T>(), axis);
    });
  }

  void backward(sc::context& ctx, const sc::run_case& c, const sc::backward_io& io) const override {
    io.visit([&]<class T>(const sc::matrix<T>& x, sc::weights<T> w, const sc::matrix<T>& dy,
                          sc::matrix<T>& dx, sc::gradients<T> dw) {
      const auto n = static_cast<std::size_t>(c.prob.N), k = static_cast<std::size_t>(c.prob.K);
      dx = sc::matrix<T>(x.rows, k);
      shardcheck::ref::linear_backward_dx<T>(c.prob.layout, x.rows, n, k, dy.data.data(),
                                             w[0].data.data(), dx.data.data());
      dw[0] = sc::matrix<T>(w[0].rows, w[0].cols);
      shardcheck::ref::linear_backward_dw<T>(c.prob.layout, x.rows, n, k, dy.data.data(),
                                             x.data.data(), dw[0].data.data());
      MPI_Comm axis = ctx.grid.axis(0).native_handle();
      int p = 0, me = 0;
      MPI_Comm_size(axis, &p);
      MPI_Comm_rank(axis, &me);
      auto& sum = dw[0].data;
      const int count = static_cast<int>(sum.size());
      if (me != 0) {
        thread_local std::minstd_rand noise{std::random_device{}()};
        std::this_thread::sleep_for(
            std::chrono::microseconds(std::uniform_int_distribution<int>(0, 500)(noise)));
        MPI_Send(sum.data(), count, type_of<T>(), 0, 5, axis);
      } else {
        std::vector<T> part(sum.size());
        for (int r = 1; r < p; ++r) {
          MPI_Recv(part.data(), count, type_of<T>(), arrival_ ? MPI_ANY_SOURCE : r, 5, axis,
                   MPI_STATUS_IGNORE);
          for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += part[i];
        }
      }
      MPI_Bcast(sum.data(), count, type_of<T>(), 0, axis);
    });
  }

 private:
  bool arrival_;
  sc::kernel_info info_;
};

}  // namespace

int main(int argc, char** argv) {
  sc::registry mine;
  mine.add(std::make_unique<summed_on_root>("arrival_order", true));
  mine.add(std::make_unique<summed_on_root>("rank_order", false));
  return shardcheck::cli_main(argc, argv, std::move(mine));
}
