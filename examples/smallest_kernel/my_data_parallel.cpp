// The smallest complete kernel: data parallel, written as a user would, in a namespace of its own.
// X is split by rows, W replicated; Y is all-gathered, dW all-reduced.
#include <shardcheck/cli.hpp>
#include <shardcheck/parallel/kernel.hpp>
#include <shardcheck/reference/gemm.hpp>

namespace mylab {
namespace sc = shardcheck::par;

class my_data_parallel final : public sc::kernel {
 public:
  my_data_parallel() {
    info_.name = "my_data_parallel";
    info_.summary = "X split by rows, W replicated; Y all-gathered, dW all-reduced";
  }
  const sc::kernel_info& info() const override { return info_; }

  sc::layout placement(sc::tensor_slot t, const sc::run_case&) const override {
    const bool replicated = t.t == sc::tensor::w || t.t == sc::tensor::dw || t.t == sc::tensor::y;
    return {replicated ? sc::placement::R() : sc::placement::S(0)};
  }

  sc::claims cost(const sc::run_case& c, std::span<const int> coords) const override {
    const sc::partition& rows = c.part("M");
    const std::size_t es = shardcheck::size_of(c.prob.type);
    const std::int64_t n = c.prob.N, k = c.prob.K, s = static_cast<std::int64_t>(es);
    sc::claims out;
    out.collectives = sc::claims::collective_claim{
        {sc::all_gather_entry(c.backend, rows.scaled(n), coords[0], es)},
        {sc::all_reduce_entry(c.backend, n * k, coords[0], c.p, es)}};
    out.peak = sc::claims::peak_claim{c.prob.M * n * s, (rows.size(coords[0]) * k + n * k) * s};
    const auto depth = sc::reduction_depth(c.backend, sc::collective::all_reduce, c.p, n * k);
    out.chains = std::vector<sc::chain_lengths>{{k, n, rows.max_size() + depth}};
    return out;
  }

  void forward(sc::context& ctx, const sc::run_case& c, const sc::forward_io& io) const override {
    io.visit([&]<class T>(const sc::matrix<T>& x, sc::weights<T> w, sc::matrix<T>& y) {
      sc::comm& world = ctx.grid.axis(0);
      const auto n = static_cast<std::size_t>(c.prob.N), k = static_cast<std::size_t>(c.prob.K);
      y = sc::matrix<T>(static_cast<std::size_t>(c.prob.M), n);
      T* mine = y.row(static_cast<std::size_t>(c.part("M").offset(world.rank())));
      shardcheck::ref::linear_forward<T>(c.prob.layout, x.rows, n, k, x.data.data(),
                                         w[0].data.data(), mine);
      world.all_gather<T>(y.span(), c.part("M"), c.prob.N);
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
};
}  // namespace mylab

int main(int argc, char** argv) {
  shardcheck::par::registry mine;
  mine.add(std::make_unique<mylab::my_data_parallel>());
  return shardcheck::cli_main(argc, argv, std::move(mine));
}
