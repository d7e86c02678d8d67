// Kernels whose ranks fall out of step, or that are slow, for the flight recorder's tests
// (parallel/include/shardcheck/parallel/flight.hpp). Data parallel: X, Y, dY and dX split by rows,
// W replicated, dW summed over the ranks.
//   early_return_comm  a rank with no rows of X returns from backward before dW's all-reduce,
//                      through shardcheck's comm: the other ranks wait in a call it never makes
//   early_return_raw   the same through plain MPI_Allreduce
//   all_reduce_comm    the same sums with no early return: every property holds
//   slow_progress      correct, but forward makes eight barriers 0.25 s apart: progressing
// Only the chains are claimed (Y: K, dX: N, dW: the longest row share + p − 1 additions).
#include <mpi.h>

#include <shardcheck/cli.hpp>
#include <shardcheck/parallel/comm.hpp>
#include <shardcheck/parallel/kernel.hpp>
#include <shardcheck/reference/gemm.hpp>

#include <chrono>
#include <span>
#include <thread>
#include <type_traits>

namespace {
namespace sc = shardcheck::par;

enum class style { comm, raw, correct, slow };

class rows_kernel final : public sc::kernel {
 public:
  rows_kernel(std::string name, style s) : style_(s) {
    info_.name = std::move(name);
    info_.summary = "data parallel; dW summed over the ranks";
  }
  const sc::kernel_info& info() const override { return info_; }

  sc::layout placement(sc::tensor_slot t, const sc::run_case&) const override {
    const bool replicated = t.t == sc::tensor::w || t.t == sc::tensor::dw;
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
      const auto n = static_cast<std::size_t>(c.prob.N), k = static_cast<std::size_t>(c.prob.K);
      y = sc::matrix<T>(x.rows, n);
      shardcheck::ref::linear_forward<T>(c.prob.layout, x.rows, n, k, x.data.data(),
                                         w[0].data.data(), y.data.data());
      if (style_ == style::slow)
        for (int i = 0; i < 8; ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(250));
          ctx.grid.axis(0).barrier();
        }
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
      // The bug: a rank with no rows has "nothing to add" and returns before the sum.
      if (x.rows == 0 && (style_ == style::comm || style_ == style::raw)) return;
      auto& sum = dw[0].data;
      if (style_ == style::raw) {
        MPI_Allreduce(MPI_IN_PLACE, sum.data(), static_cast<int>(sum.size()),
                      std::is_same_v<T, float> ? MPI_FLOAT : MPI_DOUBLE, MPI_SUM,
                      ctx.grid.axis(0).native_handle());
      } else {
        ctx.grid.axis(0).all_reduce_sum<T>(std::span<T>(sum));
      }
    });
  }

 private:
  style style_;
  sc::kernel_info info_;
};

}  // namespace

int main(int argc, char** argv) {
  sc::registry mine;
  mine.add(std::make_unique<rows_kernel>("early_return_comm", style::comm));
  mine.add(std::make_unique<rows_kernel>("early_return_raw", style::raw));
  mine.add(std::make_unique<rows_kernel>("all_reduce_comm", style::correct));
  mine.add(std::make_unique<rows_kernel>("slow_progress", style::slow));
  return shardcheck::cli_main(argc, argv, std::move(mine));
}
