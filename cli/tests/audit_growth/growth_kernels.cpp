// A kernel whose error grows faster in K than the reference's, for the audit's negative test:
// every tensor replicated, each product one naive loop in the case's dtype (s += x·w, k = 0 … K−1,
// no blocking), which is within the rigorous bound of its chain (it claims K, N, M: the true
// ones), so verify passes it, yet its error in u·|X||W|ᵀ grows about as √K where OpenBLAS's
// (blocked, several accumulators) shrinks. And one whose claimed chain does not grow with K
// while its error does: Y from the reference's GEMM plus u·(|X||W|ᵀ)·(K/16)^0.6 on every element,
// claiming a chain of 65536 whatever K (inside both tiers' bounds up to K = 65536: 147 u·mag
// there, against 65536 and λ·256). `shardcheck audit` flags them:
//   sequential_sum     "grows faster in K than the reference's error"
//   perturbed_growth   "… than the reference's error; grows faster in K than its chain"
#include <cmath>
#include <memory>
#include <shardcheck/cli.hpp>
#include <shardcheck/parallel/kernel.hpp>
#include <shardcheck/reference/bound.hpp>
#include <shardcheck/reference/gemm.hpp>
#include <string>
#include <vector>

namespace growth {
namespace sc = shardcheck::par;

class sequential_sum : public sc::kernel {
 public:
  sequential_sum() {
    info_.name = "sequential_sum";
    info_.summary = "every tensor replicated; each product one naive sequential loop";
    info_.layouts = {shardcheck::weight_layout::out_in};
  }
  const sc::kernel_info& info() const override { return info_; }
  sc::layout placement(sc::tensor_slot, const sc::run_case&) const override {
    return {sc::placement::R()};
  }
  sc::claims cost(const sc::run_case& c, std::span<const int>) const override {
    sc::claims out;
    out.collectives = sc::claims::collective_claim{};
    out.chains = std::vector<sc::chain_lengths>{{c.prob.K, c.prob.N, c.prob.M}};
    return out;
  }
  void forward(sc::context&, const sc::run_case& c, const sc::forward_io& io) const override {
    io.visit([&]<class T>(const sc::matrix<T>& x, sc::weights<T> w, sc::matrix<T>& y) {
      const auto m = static_cast<std::size_t>(c.prob.M), n = static_cast<std::size_t>(c.prob.N),
                 k = static_cast<std::size_t>(c.prob.K);
      y = sc::matrix<T>(m, n);
      for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < n; ++j) {
          T s = 0;
          for (std::size_t q = 0; q < k; ++q) s += x.data[i * k + q] * w[0].data[j * k + q];
          y.data[i * n + j] = s;
        }
    });
  }
  void backward(sc::context&, const sc::run_case& c, const sc::backward_io& io) const override {
    io.visit([&]<class T>(const sc::matrix<T>& x, sc::weights<T> w, const sc::matrix<T>& dy,
                          sc::matrix<T>& dx, sc::gradients<T> dws) {
      const auto m = static_cast<std::size_t>(c.prob.M), n = static_cast<std::size_t>(c.prob.N),
                 k = static_cast<std::size_t>(c.prob.K);
      dx = sc::matrix<T>(m, k);
      for (std::size_t i = 0; i < m; ++i)
        for (std::size_t q = 0; q < k; ++q) {
          T s = 0;
          for (std::size_t j = 0; j < n; ++j) s += dy.data[i * n + j] * w[0].data[j * k + q];
          dx.data[i * k + q] = s;
        }
      dws[0] = sc::matrix<T>(n, k);
      for (std::size_t j = 0; j < n; ++j)
        for (std::size_t q = 0; q < k; ++q) {
          T s = 0;
          for (std::size_t i = 0; i < m; ++i) s += dy.data[i * n + j] * x.data[i * k + q];
          dws[0].data[j * k + q] = s;
        }
    });
  }

 private:
  sc::kernel_info info_;
};

class perturbed_growth : public sequential_sum {
 public:
  perturbed_growth() {
    info_.name = "perturbed_growth";
    info_.summary = "the reference's Y plus u*|X||W|^T*(K/16)^0.6; claims a chain of 65536";
    info_.layouts = {shardcheck::weight_layout::out_in};
  }
  const sc::kernel_info& info() const override { return info_; }
  sc::claims cost(const sc::run_case& c, std::span<const int> coords) const override {
    sc::claims out = sequential_sum::cost(c, coords);
    out.chains->front().y = 65536;
    return out;
  }
  void forward(sc::context&, const sc::run_case& c, const sc::forward_io& io) const override {
    io.visit([&]<class T>(const sc::matrix<T>& x, sc::weights<T> w, sc::matrix<T>& y) {
      const auto m = static_cast<std::size_t>(c.prob.M), n = static_cast<std::size_t>(c.prob.N),
                 k = static_cast<std::size_t>(c.prob.K);
      y = sc::matrix<T>(m, n);
      shardcheck::ref::linear_forward<T>(c.prob.layout, m, n, k, x.data.data(), w[0].data.data(),
                                         y.data.data());
      std::vector<double> mag(m * n);
      shardcheck::ref::magnitude_forward<T>(c.prob.layout, m, n, k, x.data.data(), w[0].data.data(),
                                            mag.data());
      const double u = shardcheck::ref::unit_roundoff(c.prob.type);
      const double grow = std::pow(static_cast<double>(k) / 16, 0.6);
      for (std::size_t i = 0; i < m * n; ++i) y.data[i] += static_cast<T>(u * mag[i] * grow);
    });
  }

 private:
  sc::kernel_info info_;
};

}  // namespace growth

int main(int argc, char** argv) {
  shardcheck::par::registry mine;
  mine.add(std::make_unique<growth::sequential_sum>());
  mine.add(std::make_unique<growth::perturbed_growth>());
  return shardcheck::cli_main(argc, argv, std::move(mine));
}
