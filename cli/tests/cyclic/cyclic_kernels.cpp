// A block-cyclic kernel on shardcheck's own communicator, so that the tiled path of the harness
// (generation, reference slicing, comparison, replicas) is gated in the main suite without
// ScaLAPACK: data parallel with X, Y, dY and dX dealt by rows BC(0,nb=nb,src=src) over p ranks
// and W, dW replicated. Each rank multiplies its tiles as one packed local matrix (their rows in
// order), and dW is all-reduced. The broken variant must fail forward:
//   cyclic_rows                 passes every claimed property at 1-4 ranks
//   cyclic_rows.tiles_rotated   Y's first run of rows moved to the end of its local matrix, e.g.
//                               runs {0,2},{6,2} written as rows 6-7, 0-1: right values, wrong
//                               tiles (nothing differs on a rank with one run)
#include <algorithm>
#include <memory>
#include <shardcheck/cli.hpp>
#include <shardcheck/parallel/kernel.hpp>
#include <shardcheck/reference/gemm.hpp>
#include <string>
#include <vector>

namespace cyclic {
namespace sc = shardcheck::par;

class cyclic_rows : public sc::kernel {
 public:
  explicit cyclic_rows(std::string name = "cyclic_rows", bool rotate = false) : rotate_(rotate) {
    info_.name = std::move(name);
    info_.summary = "X, Y, dY, dX block-cyclic by rows, W replicated; all-reduce of dW";
    info_.params = {{"nb", 1, 64, 3, "row block size"},
                    {"src", 0, 3, 0, "rank of the first row block, modulo p"}};
  }
  const sc::kernel_info& info() const override { return info_; }

  sc::layout placement(sc::tensor_slot t, const sc::run_case& c) const override {
    if (t.t == sc::tensor::w || t.t == sc::tensor::dw) return {sc::placement::R()};
    return {sc::placement::BC(0, c.param("nb"), static_cast<int>(c.param("src") % c.p))};
  }

  // Y's chain K, dX's N; dW's the most local rows of any rank plus the all-reduce's depth.
  sc::claims cost(const sc::run_case& c, std::span<const int> coords) const override {
    const std::size_t es = shardcheck::size_of(c.prob.type);
    const std::int64_t nk = c.prob.N * c.prob.K;
    std::int64_t most = 0;
    for (int r = 0; r < c.p; ++r) {
      std::int64_t rows = 0;
      for (const sc::index_run& run :
           sc::cyclic_runs(c.prob.M, c.param("nb"), static_cast<int>(c.param("src") % c.p), c.p, r))
        rows += run.length;
      most = std::max(most, rows);
    }
    sc::claims out;
    out.collectives =
        sc::claims::collective_claim{{}, {sc::all_reduce_entry(c.backend, nk, coords[0], c.p, es)}};
    const auto depth = sc::reduction_depth(c.backend, sc::collective::all_reduce, c.p, nk);
    out.chains = std::vector<sc::chain_lengths>{{c.prob.K, c.prob.N, most + depth}};
    return out;
  }

  void forward(sc::context& ctx, const sc::run_case& c, const sc::forward_io& io) const override {
    io.visit([&]<class T>(const sc::matrix<T>& x, sc::weights<T> w, sc::matrix<T>& y) {
      const auto n = static_cast<std::size_t>(c.prob.N), k = static_cast<std::size_t>(c.prob.K);
      y = sc::matrix<T>(x.rows, n);
      shardcheck::ref::linear_forward<T>(c.prob.layout, x.rows, n, k, x.data.data(),
                                         w[0].data.data(), y.data.data());
      if (!rotate_) return;
      const sc::block b = sc::block_of(*this, c, sc::tensor::y, ctx.grid.coords());
      if (b.row_runs.size() < 2) return;
      const auto first = static_cast<std::ptrdiff_t>(b.row_runs.front().length * c.prob.N);
      std::rotate(y.data.begin(), y.data.begin() + first, y.data.end());
    });
  }

  void backward(sc::context& ctx, const sc::run_case& c, const sc::backward_io& io) const override {
    io.visit([&]<class T>(const sc::matrix<T>& x, sc::weights<T> w, const sc::matrix<T>& dy,
                          sc::matrix<T>& dx, sc::gradients<T> dws) {
      const auto n = static_cast<std::size_t>(c.prob.N), k = static_cast<std::size_t>(c.prob.K);
      dx = sc::matrix<T>(dy.rows, k);
      shardcheck::ref::linear_backward_dx<T>(c.prob.layout, dy.rows, n, k, dy.data.data(),
                                             w[0].data.data(), dx.data.data());
      const bool out_in = c.prob.layout == shardcheck::weight_layout::out_in;
      dws[0] = out_in ? sc::matrix<T>(n, k) : sc::matrix<T>(k, n);
      shardcheck::ref::linear_backward_dw<T>(c.prob.layout, x.rows, n, k, dy.data.data(),
                                             x.data.data(), dws[0].data.data());
      ctx.grid.axis(0).all_reduce_sum<T>(dws[0].span());
    });
  }

 private:
  bool rotate_;
  sc::kernel_info info_;
};

}  // namespace cyclic

int main(int argc, char** argv) {
  shardcheck::par::registry mine;
  mine.add(std::make_unique<cyclic::cyclic_rows>());
  mine.add(std::make_unique<cyclic::cyclic_rows>("cyclic_rows.tiles_rotated", true));
  return shardcheck::cli_main(argc, argv, std::move(mine));
}
