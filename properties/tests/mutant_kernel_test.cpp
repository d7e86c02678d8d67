// The mutant kernels around a recording kernel on a mesh of one rank: each changes what its
// inner kernel sees as it claims to, keeps the inner kernel's claims, and shows in the measured
// peak only where that is the defect.
#include <gtest/gtest.h>

#include "mpi_environment.hpp"

#include <memory>
#include <vector>

#include "mutants/kernels.hpp"
#include "shardcheck/parallel/memory.hpp"

namespace shardcheck::prop {
namespace {
using par::any_matrix;
using par::matrix;

// Records the first element block of what it is given (when `record`); Y is 1 × 1.
class recording_kernel final : public par::kernel {
 public:
  recording_kernel() {
    info_.name = "recording";
    info_.max_layers = 2;
  }
  [[nodiscard]] const par::kernel_info& info() const override { return info_; }
  [[nodiscard]] par::layout placement(par::tensor_slot, const par::run_case&) const override {
    return {par::placement::R()};
  }
  [[nodiscard]] par::claims cost(const par::run_case&, std::span<const int>) const override {
    par::claims c;
    c.peak.emplace().forward = 42;
    return c;
  }
  void forward(par::context&, const par::run_case&, const par::forward_io& io) const override {
    if (record) seen(io.x, io.ws);
    io.visit([](const auto&, auto, auto& y) { y = std::decay_t<decltype(y)>(1, 1); });
  }
  void backward(par::context&, const par::run_case&, const par::backward_io& io) const override {
    if (record) seen(io.x, io.ws);
    if (record) dy = std::get<matrix<double>>(io.dy).data;
  }
  bool record = true;
  mutable mem::tracked_vector<double> x, dy;
  mutable std::vector<mem::tracked_vector<double>> ws;

 private:
  void seen(const any_matrix& xm, std::span<const any_matrix> wm) const {
    if (const auto* d = std::get_if<matrix<double>>(&xm)) x = d->data;
    ws.clear();
    for (const any_matrix& w : wm)
      if (const auto* d = std::get_if<matrix<double>>(&w)) ws.push_back(d->data);
  }
  par::kernel_info info_;
};

matrix<double> filled(std::size_t rows, std::size_t cols, std::vector<double> values) {
  matrix<double> m(rows, cols);
  std::copy(values.begin(), values.end(), m.data.begin());
  return m;
}

struct one_rank {
  par::comm world = par::comm::world();
  par::mesh grid{world, {1}};
  par::context ctx{grid};
};

par::run_case f64_case() {
  par::run_case c;
  c.prob.type = dtype::f64;
  return c;
}

TEST(mutant_kernel, float_inputs_rounds_every_input_of_a_f64_case) {
  test::need_mpi();
  one_rank r;
  recording_kernel inner;
  auto log = std::make_shared<mutants::fire_log>();
  const mutants::float_inputs k(inner, "mutant.float_inputs@recording", log);
  EXPECT_EQ(k.info().name, "mutant.float_inputs@recording");
  EXPECT_EQ(k.info().dtypes, (std::vector<dtype>{dtype::f64}));
  const any_matrix x = filled(1, 2, {0.1, 0.5});
  const std::vector<any_matrix> ws{filled(1, 2, {0.3, 2.0})};
  any_matrix y;
  k.forward(r.ctx, f64_case(), par::forward_io{x, ws, y});
  EXPECT_EQ(inner.x[0], static_cast<double>(0.1f));
  EXPECT_EQ(inner.x[1], 0.5);
  EXPECT_EQ(inner.ws[0][0], static_cast<double>(0.3f));
  EXPECT_EQ(std::get<matrix<double>>(x).data[0], 0.1);  // the harness's inputs untouched
  EXPECT_EQ(log->acts, 1);
  const any_matrix dy = filled(1, 1, {0.7});
  any_matrix dx;
  std::vector<any_matrix> dws(1);
  k.backward(r.ctx, f64_case(), par::backward_io{x, ws, dy, dx, dws});
  EXPECT_EQ(inner.dy[0], static_cast<double>(0.7f));
}

TEST(mutant_kernel, float_inputs_hides_its_copies_from_the_meter) {
  test::need_mpi();
  one_rank r;
  recording_kernel inner;
  inner.record = false;
  const mutants::float_inputs k(inner, "m", std::make_shared<mutants::fire_log>());
  const any_matrix x = filled(64, 64, std::vector<double>(64 * 64, 0.1));
  const std::vector<any_matrix> ws{filled(64, 64, std::vector<double>(64 * 64, 0.1))};
  any_matrix y;
  mem::peak_scope scope;
  k.forward(r.ctx, f64_case(), par::forward_io{x, ws, y});
  EXPECT_EQ(scope.peak(), sizeof(double));  // Y, 1 × 1: the inner kernel's own
}

TEST(mutant_kernel, copies_w_shows_the_weights_in_the_peak) {
  test::need_mpi();
  if (!mem::global_new_tracked()) GTEST_SKIP() << "operator new is not tracked in this binary";
  one_rank r;
  recording_kernel inner;
  inner.record = false;
  auto log = std::make_shared<mutants::fire_log>();
  const mutants::copies_w k(inner, "m", log);
  const any_matrix x = filled(1, 8, std::vector<double>(8, 1.0));
  const std::vector<any_matrix> ws{filled(8, 8, std::vector<double>(64, 2.0))};
  any_matrix y;
  mem::peak_scope scope;
  k.forward(r.ctx, f64_case(), par::forward_io{x, ws, y});
  EXPECT_GE(scope.peak(), 64 * sizeof(double) + sizeof(double));
  EXPECT_EQ(log->acts, 1);
}

TEST(mutant_kernel, last_w_rows_reversed_reverses_only_the_last_weight) {
  test::need_mpi();
  one_rank r;
  recording_kernel inner;
  auto log = std::make_shared<mutants::fire_log>();
  const mutants::last_w_rows_reversed k(inner, "m", log);
  const any_matrix x = filled(1, 2, {1, 2});
  const std::vector<any_matrix> ws{filled(2, 2, {1, 2, 3, 4}), filled(3, 2, {1, 2, 3, 4, 5, 6})};
  any_matrix y;
  {
    mem::peak_scope scope;
    k.forward(r.ctx, f64_case(), par::forward_io{x, ws, y});
  }
  ASSERT_EQ(inner.ws.size(), 2u);
  EXPECT_EQ(std::vector<double>(inner.ws[0].begin(), inner.ws[0].end()),
            (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(std::vector<double>(inner.ws[1].begin(), inner.ws[1].end()),
            (std::vector<double>{5, 6, 3, 4, 1, 2}));
  EXPECT_EQ(std::get<matrix<double>>(ws[1]).data[0], 1.0);
  EXPECT_EQ(log->acts, 1);
}

TEST(mutant_kernel, decorators_keep_the_inner_claims) {
  test::need_mpi();
  recording_kernel inner;
  const mutants::copies_w k(inner, "mutant.copies_w@recording",
                            std::make_shared<mutants::fire_log>());
  const par::run_case c = f64_case();
  EXPECT_EQ(k.cost(c, {}).peak->forward, 42);
  EXPECT_EQ(k.info().max_layers, 2u);
  EXPECT_EQ(k.mesh_dims(c), inner.mesh_dims(c));
}

}  // namespace
}  // namespace shardcheck::prop
