// The mutant kernels around a recording kernel on a mesh of one rank: each changes what its
// inner kernel sees as it claims to, keeps the inner kernel's claims, and shows in the measured
// peak only where that is the defect.
#include <gtest/gtest.h>

#include "mpi_environment.hpp"

#include <memory>
#include <vector>

#include "mutants/kernels.hpp"
#include "shardcheck/parallel/memory.hpp"
#include "shardcheck/parallel/registry.hpp"

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

// sharded_weights on one rank, out_in, W's 4 rows of 2 f64 (16 B) in buckets of 32 B: two
// buckets of two rows. X = [1 2; 3 4], W rows [1 0], [0 1], [2 0], [0 2]: Y = X·Wᵀ has columns
// 0–1 from bucket 0, 2–3 from bucket 1.
struct two_buckets {
  par::registry strategies = par::builtin_strategies();
  const par::kernel& host = *strategies.find("sharded_weights");
  par::run_case c = completed(
      "strategy=sharded_weights p=1 M=2 N=4 K=2 dtype=f64 layout=out_in bucket=32 overlap=1");
  any_matrix x = filled(2, 2, {1, 2, 3, 4});
  std::vector<any_matrix> ws{filled(4, 2, {1, 0, 0, 1, 2, 0, 0, 2})};

  par::run_case completed(const char* line) const {
    par::run_case out = par::run_case::parse(line);
    par::complete_and_validate(host, out);
    return out;
  }
  // Y of k's forward; `peak`: the forward's measured peak.
  std::vector<double> y_of(const par::kernel& k, const par::layer_wrapper& wrap,
                           std::int64_t* peak = nullptr) const {
    par::comm world = par::comm::world();
    par::mesh grid(world, {1}, par::stack_options{c.backend, wrap});
    par::context ctx{grid};
    any_matrix y = matrix<double>();
    const mem::peak_scope scope;
    k.forward(ctx, c, par::forward_io{x, ws, y});
    if (peak != nullptr) *peak = static_cast<std::int64_t>(scope.peak());
    const auto& data = std::get<matrix<double>>(y).data;
    return {data.begin(), data.end()};
  }
};

TEST(mutant_kernel, reuses_buffer_lands_the_next_gather_in_the_buffer_in_use) {
  test::need_mpi();
  const two_buckets t;
  auto log = std::make_shared<mutants::fire_log>();
  const mutants::algorithm_mutant m =
      mutants::make_algorithm_mutant("reuses_buffer", t.host, "mutant.reuses_buffer@sw", log);
  EXPECT_EQ(t.y_of(t.host, {}), (std::vector<double>{1, 2, 2, 4, 3, 4, 6, 8}));
  // Bucket 0's products read bucket 1's rows; bucket 1's arrive whole.
  EXPECT_EQ(t.y_of(*m.k, m.wrap), (std::vector<double>{2, 4, 2, 4, 6, 8, 6, 8}));
  EXPECT_EQ(log->acts, 1);
}

TEST(mutant_kernel, padded_buckets_states_and_holds_a_full_bucket_of_padding) {
  test::need_mpi();
  two_buckets t;
  auto log = std::make_shared<mutants::fire_log>();
  const mutants::algorithm_mutant m =
      mutants::make_algorithm_mutant("padded_buckets", t.host, "mutant.padded_buckets@sw", log);
  const std::vector<int> at{0};
  // W's 4 rows as 3 + 1 (48 B buckets): the pair padded to 3 + 3 rows, 2 rows · 16 B more.
  t.c = t.completed(
      "strategy=sharded_weights p=1 M=2 N=4 K=2 dtype=f64 layout=out_in bucket=48 overlap=1");
  EXPECT_EQ(m.k->cost(t.c, at).peak->forward, t.host.cost(t.c, at).peak->forward + 32);
  EXPECT_EQ(m.k->cost(t.c, at).peak->backward, t.host.cost(t.c, at).peak->backward + 32);
  std::int64_t plain = 0, padded = 0;
  (void)t.y_of(t.host, {}, &plain);
  (void)t.y_of(*m.k, {}, &padded);
  EXPECT_EQ(padded, plain + 32);
  EXPECT_EQ(log->acts, 1);
  // One bucket, or no overlap: nothing padded that the peak would show.
  for (const char* line :
       {"strategy=sharded_weights p=1 M=2 N=4 K=2 dtype=f64 layout=out_in bucket=64 overlap=1",
        "strategy=sharded_weights p=1 M=2 N=4 K=2 dtype=f64 layout=out_in bucket=48 overlap=0"}) {
    t.c = t.completed(line);
    EXPECT_EQ(m.k->cost(t.c, at).peak->forward, t.host.cost(t.c, at).peak->forward) << line;
  }
}

}  // namespace
}  // namespace shardcheck::prop
