// Kernels whose input X is placed P (partial sums pending, on the one mesh axis): each rank holds
// a share of every element of X (ref::partial_share: asymmetric, with offsets of both signs, that
// sum to X exactly in any order). W, Y, dY, dX and dW are replicated.
//   partial_x                 all-reduces its share of X (P → R), then the local products: every
//                             property holds
//   partial_x.as_replicated   reads its share as X (the P placement taken for R)
//   partial_x.rank0_share     takes rank 0's share as X (zeroes the others' before the sum)
//   partial_x.scaled          takes p × its own share as X (right only if the shares were equal)
// The three wrong rules fail forward from p = 2 on. Their backward is partial_x's, and they claim
// no collectives: forward is what they get wrong.
//
// Example: p = 2, X = [0.75]: rank 0 may hold 0.5078125 and rank 1 0.2421875; partial_x sums
// them to 0.75 on both ranks, as_replicated computes with 0.5078125 on rank 0.
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <shardcheck/cli.hpp>
#include <shardcheck/parallel/kernel.hpp>
#include <shardcheck/parallel/ledger.hpp>
#include <shardcheck/reference/gemm.hpp>

namespace sc = shardcheck::par;

namespace {

enum class rule { reduce, as_replicated, rank0_share, scaled };

class partial_x final : public sc::kernel {
 public:
  partial_x(std::string name, rule r) : rule_(r) {
    info_.name = std::move(name);
    info_.summary = "X partial (P), W replicated; X all-reduced, then the local products";
  }
  [[nodiscard]] const sc::kernel_info& info() const override { return info_; }

  [[nodiscard]] sc::layout placement(sc::tensor_slot t, const sc::run_case&) const override {
    if (t.t == sc::tensor::x) return {sc::placement::P()};
    return {sc::placement::R()};
  }

  // X's sum is exact (the shares sum to X in any order), so the chains are the local products'.
  [[nodiscard]] sc::claims cost(const sc::run_case& c, std::span<const int> coords) const override {
    const std::size_t es = shardcheck::size_of(c.prob.type);
    const std::int64_t mk = c.prob.M * c.prob.K;
    sc::claims out;
    if (rule_ == rule::reduce)
      out.collectives =
          sc::claims::collective_claim{{sc::all_reduce_entry(c.backend, mk, coords[0], c.p, es)},
                                       {sc::all_reduce_entry(c.backend, mk, coords[0], c.p, es)}};
    out.chains = std::vector<sc::chain_lengths>{{c.prob.K, c.prob.N, c.prob.M}};
    return out;
  }

  void forward(sc::context& ctx, const sc::run_case& c, const sc::forward_io& io) const override {
    io.visit([&]<class T>(const sc::matrix<T>& x, sc::weights<T> w, sc::matrix<T>& y) {
      sc::comm& world = ctx.grid.axis(0);
      sc::matrix<T> whole = x;
      if (rule_ == rule::rank0_share && world.rank() != 0)
        for (T& v : whole.data) v = T(0);
      if (rule_ == rule::scaled)
        for (T& v : whole.data) v *= static_cast<T>(c.p);
      if (rule_ == rule::reduce || rule_ == rule::rank0_share)
        world.all_reduce_sum<T>(whole.span());
      product(c, whole, w[0], y);
    });
  }

  void backward(sc::context& ctx, const sc::run_case& c, const sc::backward_io& io) const override {
    io.visit([&]<class T>(const sc::matrix<T>& x, sc::weights<T> w, const sc::matrix<T>& dy,
                          sc::matrix<T>& dx, sc::gradients<T> dw) {
      sc::matrix<T> whole = x;
      ctx.grid.axis(0).all_reduce_sum<T>(whole.span());
      const auto m = static_cast<std::size_t>(c.prob.M), n = static_cast<std::size_t>(c.prob.N),
                 k = static_cast<std::size_t>(c.prob.K);
      dx = sc::matrix<T>(m, k);
      shardcheck::ref::linear_backward_dx<T>(c.prob.layout, m, n, k, dy.data.data(),
                                             w[0].data.data(), dx.data.data());
      dw[0] = sc::matrix<T>(w[0].rows, w[0].cols);
      shardcheck::ref::linear_backward_dw<T>(c.prob.layout, m, n, k, dy.data.data(),
                                             whole.data.data(), dw[0].data.data());
    });
  }

 private:
  template <class T>
  static void product(const sc::run_case& c, const sc::matrix<T>& x, const sc::matrix<T>& w,
                      sc::matrix<T>& y) {
    const auto m = static_cast<std::size_t>(c.prob.M), n = static_cast<std::size_t>(c.prob.N),
               k = static_cast<std::size_t>(c.prob.K);
    y = sc::matrix<T>(m, n);
    shardcheck::ref::linear_forward<T>(c.prob.layout, m, n, k, x.data.data(), w.data.data(),
                                       y.data.data());
  }

  sc::kernel_info info_;
  rule rule_;
};

}  // namespace

int main(int argc, char** argv) {
  sc::registry mine;
  mine.add(std::make_unique<partial_x>("partial_x", rule::reduce));
  mine.add(std::make_unique<partial_x>("partial_x.as_replicated", rule::as_replicated));
  mine.add(std::make_unique<partial_x>("partial_x.rank0_share", rule::rank0_share));
  mine.add(std::make_unique<partial_x>("partial_x.scaled", rule::scaled));
  return shardcheck::cli_main(argc, argv, std::move(mine));
}
