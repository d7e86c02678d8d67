// Two kernels that write one element past a buffer, for the sanitizer build's negative tests
// (never in the product): data parallel (X split by rows, W replicated; Y all-gathered, dW
// all-reduced), correct except for one store.
//   overrun_output   after the all-gather, Y[M·N] = 1: one past the matrix buffer Y
//                    (tracking_allocator). For M=3, N=5 in f64 that is byte 120 of a 120-byte
//                    block.
//   overrun_scratch  the local rows are computed in a std::vector (operator new, the meter's hook)
//                    of rows·N elements, and element rows·N is written too.
// Under AddressSanitizer or valgrind each must be reported: the meter's blocks have their exact
// sizes, so byte 120 is outside the block (rounded up to 128 it was not).
#include <shardcheck/cli.hpp>
#include <shardcheck/parallel/kernel.hpp>
#include <shardcheck/reference/gemm.hpp>

#include <algorithm>
#include <vector>

namespace overrun {
namespace sc = shardcheck::par;

// A store the compiler must keep (a dead store into a block it can see freed may be dropped).
template <class T>
void store_one_past(T* end) {
  *static_cast<volatile T*>(end) = T(1);
}

class overrun_kernel final : public sc::kernel {
 public:
  overrun_kernel(std::string name, bool scratch) : scratch_(scratch) {
    info_.name = std::move(name);
    info_.summary = "data parallel writing one element past a buffer";
  }
  const sc::kernel_info& info() const override { return info_; }

  sc::layout placement(sc::tensor_slot t, const sc::run_case&) const override {
    const bool replicated = t.t == sc::tensor::w || t.t == sc::tensor::dw || t.t == sc::tensor::y;
    return {replicated ? sc::placement::R() : sc::placement::S(0)};
  }

  void forward(sc::context& ctx, const sc::run_case& c, const sc::forward_io& io) const override {
    io.visit([&]<class T>(const sc::matrix<T>& x, sc::weights<T> w, sc::matrix<T>& y) {
      sc::comm& world = ctx.grid.axis(0);
      const auto n = static_cast<std::size_t>(c.prob.N), k = static_cast<std::size_t>(c.prob.K);
      y = sc::matrix<T>(static_cast<std::size_t>(c.prob.M), n);
      T* mine = y.row(static_cast<std::size_t>(c.part("M").offset(world.rank())));
      if (scratch_) {
        std::vector<T> local(x.rows * n);
        shardcheck::ref::linear_forward<T>(c.prob.layout, x.rows, n, k, x.data.data(),
                                           w[0].data.data(), local.data());
        store_one_past(local.data() + local.size());
        std::copy(local.begin(), local.end(), mine);
      } else {
        shardcheck::ref::linear_forward<T>(c.prob.layout, x.rows, n, k, x.data.data(),
                                           w[0].data.data(), mine);
      }
      world.all_gather<T>(y.span(), c.part("M"), c.prob.N);
      if (!scratch_) store_one_past(y.data.data() + y.data.size());
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
      ctx.grid.axis(0).all_reduce_sum<T>(dw[0].span());
    });
  }

 private:
  sc::kernel_info info_;
  bool scratch_;
};
}  // namespace overrun

int main(int argc, char** argv) {
  shardcheck::par::registry mine;
  mine.add(std::make_unique<overrun::overrun_kernel>("overrun_output", false));
  mine.add(std::make_unique<overrun::overrun_kernel>("overrun_scratch", true));
  return shardcheck::cli_main(argc, argv, std::move(mine));
}
