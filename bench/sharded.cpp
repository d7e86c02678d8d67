// sharded_weights under MPI: forward of a double layer, N = K = 2048, with W gathered in buckets
// of B ∈ {all of W, W/4, W/16} bytes, at M = 2048 (the 2048³) and at small batches
// M ∈ {64, 128, 256}, where one rank's products take about as long as the gathers.
//
// Per (M, B), four timings of the same buckets, taken in turn inside each iteration (the order
// rotates, so drift and warm caches hit them alike), each the slowest rank's wall time:
//   t_compute  forward with every gather skipped (the skip_gathers layer below, added to the
//              comm's stack from outside: the same kernel, buffers, own-row copies, products and
//              progress calls; no collective reaches MPI)
//   t_comm     the same gathers one after another, without the products
//   t_serial   forward with overlap=0: each gather waited for, then its products
//   t_overlap  forward with overlap=1 (the manual time): gather i+1 in flight during products i
// hidden = (t_compute + t_comm − t_overlap) / t_comm, clipped to [0, 1]: the share of the gather
// time the overlapped forward does not pay. One bucket leaves nothing to hide (its gather precedes
// every product), so B = W reads ≈ 0 by construction; at most (n−1)/n of n buckets can be hidden.
// serial_over_sum = t_serial / (t_compute + t_comm) ≈ 1 checks that the parts add up. t_mpi: the
// time the overlapped forward spent inside MPI calls (starting each gather, MPI_Test between
// product pieces, MPI_Wait; slowest rank). Open MPI's shared-memory transport copies a message
// with the receiving rank's CPU inside such calls, so t_mpi ≈ t_comm says the copies ran on the
// compute core, where no overlap can hide them. peak / bound: measured peak bytes of the
// overlapped forward and the cost model's bound (max over ranks). Each configuration's result is
// checked once (forward property) before timing. Every timing is the median over a repetition's
// iterations (hidden is computed from those medians); read the medians over repetitions:
//
//   mpirun -n 2 --bind-to core build/bench/shardcheck_bench_sharded
//       --benchmark_repetitions=5 --benchmark_report_aggregates_only=true   (one line)
//
// Iterations are fixed and repetitions come from the command line, the same on every rank (every
// rank must run the same number of collectives); only rank 0 reports.
#include <benchmark/benchmark.h>
#include <mpi.h>

#include <malloc.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <memory>
#include <utility>
#include <vector>

#include "mpi_bench.hpp"
#include "shardcheck/parallel/comm.hpp"
#include "shardcheck/parallel/kernel.hpp"
#include "shardcheck/parallel/memory.hpp"
#include "shardcheck/parallel/plan.hpp"
#include "shardcheck/properties/harness.hpp"
#include "strategies/sharded_weights.hpp"

namespace {

using namespace shardcheck;
constexpr std::int64_t width = 2048;  // N = K
constexpr std::int64_t w_bytes = width * width * static_cast<std::int64_t>(sizeof(double));
par::comm* world = nullptr;

// The compute-only baseline: a layer above the checker that drops every started all-gather, so
// the kernel's buffers keep this rank's rows only (and the ledger stays empty). Everything else
// goes through. Its Y is wrong wherever another rank owns W rows, so it is timed only, never
// checked.
class skip_gathers final : public par::collectives {
 public:
  explicit skip_gathers(std::unique_ptr<par::collectives> inner) : inner_(std::move(inner)) {}
  [[nodiscard]] int rank() const override { return inner_->rank(); }
  [[nodiscard]] int size() const override { return inner_->size(); }
  [[nodiscard]] MPI_Comm native_handle() const override { return inner_->native_handle(); }
  par::traffic run(const par::call& c) override { return inner_->run(c); }
  void start(const par::call& c) override {
    if (c.kind != par::collective::all_gather) inner_->start(c);
  }
  bool test() override { return inner_->test(); }
  par::traffic wait() override { return inner_->wait(); }
  [[nodiscard]] MPI_Request send(const par::message& m) override { return inner_->send(m); }
  void wait_send(MPI_Request& r) override { inner_->wait_send(r); }
  std::int64_t recv(const par::message& m) override { return inner_->recv(m); }

 private:
  std::unique_ptr<par::collectives> inner_;
};

par::stack_options without_gathers(const par::backend_spec& b) {
  return {b, [](std::unique_ptr<par::collectives> inner, par::layer_position where, int) {
            if (where == par::layer_position::below) return inner;
            return std::unique_ptr<par::collectives>(new skip_gathers(std::move(inner)));
          }};
}

const par::sharded_weights strategy;

par::run_case make_case(std::int64_t m, std::int64_t divisor, int overlap) {
  par::run_case c;
  c.strategy = strategy.name();
  c.p = world->size();
  c.prob.M = m;
  c.prob.N = c.prob.K = width;
  c.prob.type = dtype::f64;
  c.prob.layout = weight_layout::out_in;
  c.mode = value_mode::uniform;
  c.seed = 1;
  c.params = {{"bucket", w_bytes / divisor}, {"overlap", overlap}};
  par::complete_and_validate(strategy, c);
  return c;
}

void sharded_forward(benchmark::State& st) {
  const par::run_case overlapped = make_case(st.range(0), st.range(1), 1),
                      serial = make_case(st.range(0), st.range(1), 0);
  par::mesh grid(*world, strategy.mesh_dims(overlapped),
                 par::stack_options{overlapped.backend, {}});
  const par::case_plan case_plan = par::plan_of(strategy, overlapped, grid.coords());
  const prop::rank_inputs in = prop::inputs_of(case_plan, overlapped);
  par::context ctx{grid};
  par::mesh no_wire(*world, strategy.mesh_dims(overlapped), without_gathers(overlapped.backend));
  par::context compute_ctx{no_wire};
  par::comm& axis = grid.axis(0);
  const par::bucket_plan plan = par::plan_buckets(overlapped);
  const par::partition& rows = overlapped.part(par::weight_row_key(overlapped));
  // The same gathers as forward, one bucket at a time, into one buffer touched beforehand.
  mem::tracked_vector<double> gather_buffer(static_cast<std::size_t>(plan.per_bucket * plan.cols));
  auto gathers_only = [&] {
    for (std::int64_t i = 0; i < plan.count; ++i) {
      const auto n = static_cast<std::size_t>((plan.hi(i) - plan.lo(i)) * plan.cols);
      axis.start_all_gather<double>(std::span<double>(gather_buffer.data(), n),
                                    axis.window_counts(rows, plan.lo(i), plan.hi(i), plan.cols));
      axis.wait_pending();
    }
  };
  enum part { compute, comm, serial_fw, overlap_fw, in_mpi, parts };
  std::array<std::vector<double>, parts> seconds;
  double peak = 0;
  std::int64_t iteration = 0;
  for (auto _ : st) {
    for (int turn = 0; turn < in_mpi; ++turn) {
      const int which = static_cast<int>((turn + iteration) % in_mpi);
      par::any_matrix y;
      const par::forward_io io{in.x, in.ws, y};
      double t = 0;
      if (which == compute) {
        t = bench::timed(*world, [&] { strategy.forward(compute_ctx, overlapped, io); });
      } else if (which == comm) {
        t = bench::timed(*world, gathers_only);
      } else if (which == serial_fw) {
        t = bench::timed(*world, [&] { strategy.forward(ctx, serial, io); });
      } else {
        double measured = 0;
        t = bench::timed(*world, [&] {
          mem::peak_scope scope;
          bench::comm_clock = {true, 0.0};
          strategy.forward(ctx, overlapped, io);
          bench::comm_clock.running = false;
          measured = static_cast<double>(scope.peak());
        });
        peak = std::max(peak, bench::max_over_ranks(*world, measured));
        seconds[in_mpi].push_back(bench::max_over_ranks(*world, bench::comm_clock.seconds));
        st.SetIterationTime(t);
      }
      seconds[static_cast<std::size_t>(which)].push_back(t);
    }
    ++iteration;
  }
  std::array<double, parts> t{};
  for (std::size_t i = 0; i < parts; ++i) t[i] = bench::median(seconds[i]);
  const par::claims cost = strategy.cost(overlapped, case_plan.coords);
  st.counters["buckets"] = static_cast<double>(plan.count);
  st.counters["t_compute_ms"] = 1e3 * t[compute];
  st.counters["t_comm_ms"] = 1e3 * t[comm];
  st.counters["t_serial_ms"] = 1e3 * t[serial_fw];
  st.counters["t_overlap_ms"] = 1e3 * t[overlap_fw];
  st.counters["t_mpi_ms"] = 1e3 * t[in_mpi];
  st.counters["hidden"] =
      t[comm] > 0 ? std::clamp((t[compute] + t[comm] - t[overlap_fw]) / t[comm], 0.0, 1.0) : 0.0;
  st.counters["serial_over_sum"] = t[serial_fw] / (t[compute] + t[comm]);
  st.counters["peak_MiB"] = peak / (1 << 20);
  st.counters["bound_MiB"] =
      bench::max_over_ranks(*world, static_cast<double>(cost.peak.value().forward)) / (1 << 20);
}

constexpr std::array<std::int64_t, 3> divisors{1, 4, 16};

void configurations(benchmark::internal::Benchmark* b, std::initializer_list<std::int64_t> ms) {
  b->ArgNames({"M", "W_over"});
  for (std::int64_t m : ms)
    for (std::int64_t d : divisors) b->Args({m, d});
}

}  // namespace

BENCHMARK(sharded_forward)
    ->Apply([](benchmark::internal::Benchmark* b) { configurations(b, {2048}); })
    ->Iterations(4)
    ->DisplayAggregatesOnly()
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(sharded_forward)
    ->Apply([](benchmark::internal::Benchmark* b) {
      configurations(b, {64, 128, 256});
    })
    ->Iterations(20)
    ->DisplayAggregatesOnly()
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

int main(int argc, char** argv) {
  bench::keep_freed_memory();  // warm pages for every iteration alike
  par::environment env(argc, argv);
  par::comm w = par::comm::world();
  world = &w;
  benchmark::Initialize(&argc, argv);
  // Check each configuration once before timing: forward equals the reference within its bound.
  for (std::int64_t m : {2048, 64, 128, 256})
    for (std::int64_t divisor : divisors) {
      const par::run_case c = make_case(m, divisor, 1);
      const auto v = prop::run_on_rank(prop::subject{&strategy, {}}, c, w,
                                       static_cast<unsigned>(prop::property::runs) |
                                           static_cast<unsigned>(prop::property::forward));
      int failed = v.failed != 0 ? 1 : 0;
      MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, w.native_handle());
      if (failed != 0) {
        if (v.failed != 0) std::fprintf(stderr, "check failed: %s\n", v.message.c_str());
        return 1;
      }
      if (w.rank() == 0)
        std::printf("checked: %s (worst error %.2f·u·mag)\n", c.to_string().c_str(), v.worst_error);
    }
  bench::silent_reporter quiet;
  if (w.rank() == 0)
    benchmark::RunSpecifiedBenchmarks();
  else
    benchmark::RunSpecifiedBenchmarks(&quiet);
  benchmark::Shutdown();
  return 0;
}
