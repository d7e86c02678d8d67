// sharded_weights under MPI: forward of a 2048³ double layer with W gathered in buckets of
// B ∈ {all of W, W/4, W/16} bytes. Per B: time with overlap (the manual time: the slowest rank),
// the same buckets without overlap, the gathers alone, the share of gather time that overlap
// hides = (t_no_overlap − t_overlap) / t_comm, and the measured peak bytes against the cost
// model's bound (max over ranks). The three are timed in turn inside each iteration, so drift hits
// them alike. A second reading of the hidden share, less exposed to noise in the products:
// 1 − (time the overlapped forward spent waiting for gathers) / t_comm. Each B's result is checked once (forward property) before timing.
//
//   mpirun -n 2 build/bench/shardcheck_bench_sharded
//
// Iterations and repetitions are fixed (every rank must run the same number of collectives);
// only rank 0 reports.
#include <benchmark/benchmark.h>
#include <mpi.h>

#include <malloc.h>

#include <cstdio>
#include <vector>

#include "mpi_bench.hpp"
#include "shardcheck/parallel/memory.hpp"
#include "shardcheck/parallel/mpi.hpp"
#include "shardcheck/parallel/strategy.hpp"
#include "shardcheck/properties/harness.hpp"
#include "shardcheck/reference/data.hpp"
#include "strategies/sharded_weights.hpp"

namespace {

using namespace shardcheck;
constexpr std::int64_t size = 2048;
constexpr std::int64_t w_bytes = size * size * static_cast<std::int64_t>(sizeof(double));
par::comm* world = nullptr;
const par::sharded_weights strategy;

par::run_case make_case(std::int64_t divisor, int overlap) {
  par::run_case c;
  c.strategy = strategy.name();
  c.p = world->size();
  c.prob.M = c.prob.N = c.prob.K = size;
  c.prob.type = dtype::f64;
  c.prob.layout = weight_layout::out_in;
  c.mode = value_mode::uniform;
  c.seed = 1;
  c.params = {{"bucket", w_bytes / divisor}, {"overlap", overlap}};
  par::complete_and_validate(strategy, c);
  return c;
}

par::matrix<double> block(const par::run_case& c, par::tensor t, std::uint32_t id) {
  const auto coords = std::vector<int>{world->rank()};
  const par::block b = par::block_of(strategy, c, t, coords);
  par::matrix<double> m(static_cast<std::size_t>(b.rows), static_cast<std::size_t>(b.cols));
  ref::fill_block<double>(c.mode, c.seed, id, static_cast<std::uint64_t>(b.row0),
                          static_cast<std::uint64_t>(b.rows), static_cast<std::uint64_t>(b.col0),
                          static_cast<std::uint64_t>(b.cols), m.data.data());
  return m;
}

void sharded_forward(benchmark::State& st) {
  const std::int64_t divisor = st.range(0);
  const par::run_case overlapped = make_case(divisor, 1), serial = make_case(divisor, 0);
  const auto x = block(overlapped, par::tensor::x, static_cast<std::uint32_t>(ref::tensor_id::x));
  const auto w = block(overlapped, par::tensor::w, static_cast<std::uint32_t>(ref::tensor_id::w));
  par::mesh grid(*world, {world->size()});
  par::ledger log;
  par::context ctx{grid, log};
  grid.attach(nullptr, false);
  par::comm& axis = grid.axis(0);
  const par::bucket_plan plan = par::plan_buckets(overlapped);
  const par::partition& rows = overlapped.part(par::weight_row_key(overlapped));
  const par::any_matrix xa = x, wa = w;
  // The same gathers as forward, one bucket at a time, without the products, into one buffer
  // touched beforehand: communication alone (forward's page faults on fresh buckets are not in it).
  mem::tracked_vector<double> gather_buffer(static_cast<std::size_t>(plan.per_bucket * plan.cols));
  auto gathers_only = [&] {
    for (std::int64_t i = 0; i < plan.count; ++i) {
      const auto n = static_cast<std::size_t>((plan.hi(i) - plan.lo(i)) * plan.cols);
      axis.start_all_gather<double>(std::span<double>(gather_buffer.data(), n),
                                    axis.window_counts(rows, plan.lo(i), plan.hi(i), plan.cols));
      axis.wait_all_gather();
    }
  };
  double sum_overlap = 0, sum_serial = 0, sum_comm = 0, sum_exposed = 0, peak = 0;
  std::int64_t iteration = 0;
  for (auto _ : st) {
    sum_comm += bench::timed(*world, gathers_only);
    // Alternate which forward runs first, so that neither gains from the other's warm heap.
    double t = 0;
    for (int turn = 0; turn < 2; ++turn) {
      par::any_matrix y;
      if ((turn == 0) == (iteration % 2 == 0)) {
        sum_serial += bench::timed(*world, [&] { strategy.forward(ctx, serial, xa, wa, y); });
        continue;
      }
      double measured = 0;
      const double waited = axis.waited_seconds();
      t = bench::timed(*world, [&] {
        mem::peak_scope scope;
        strategy.forward(ctx, overlapped, xa, wa, y);
        measured = static_cast<double>(scope.peak());
      });
      peak = std::max(peak, bench::max_over_ranks(*world, measured));
      sum_exposed += bench::max_over_ranks(*world, axis.waited_seconds() - waited);
    }
    ++iteration;
    sum_overlap += t;
    st.SetIterationTime(t);
  }
  const double n = static_cast<double>(st.iterations());
  const auto cost = strategy.cost(overlapped, std::vector<int>{world->rank()});
  st.counters["buckets"] = static_cast<double>(plan.count);
  st.counters["t_no_overlap_ms"] = 1e3 * sum_serial / n;
  st.counters["t_comm_ms"] = 1e3 * sum_comm / n;
  st.counters["hidden"] = sum_comm > 0 ? (sum_serial - sum_overlap) / sum_comm : 0.0;
  // The same share read off the waits: gather time still exposed in the overlapped forward.
  st.counters["t_exposed_ms"] = 1e3 * sum_exposed / n;
  st.counters["hidden_by_wait"] = sum_comm > 0 ? 1 - sum_exposed / sum_comm : 0.0;
  st.counters["peak_MiB"] = peak / (1 << 20);
  st.counters["bound_MiB"] =
      bench::max_over_ranks(*world, static_cast<double>(cost.peak_forward)) / (1 << 20);
}

}  // namespace

BENCHMARK(sharded_forward)
    ->ArgName("W_over")
    ->Arg(1)
    ->Arg(4)
    ->Arg(16)
    ->Iterations(6)
    ->Repetitions(3)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

int main(int argc, char** argv) {
  // Buckets up to 32 MiB come from the heap and freed memory stays mapped: every bucket after
  // the first lands in pages already touched, for both variants alike.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  par::environment env(argc, argv);
  par::comm w = par::comm::world();
  world = &w;
  benchmark::Initialize(&argc, argv);
  // Check each configuration once before timing: forward equals the reference within its bound.
  for (std::int64_t divisor : {1, 4, 16}) {
    const par::run_case c = make_case(divisor, 1);
    const auto v = prop::run_on_rank(
        strategy, c, w,
        static_cast<unsigned>(prop::property::runs) | static_cast<unsigned>(prop::property::forward));
    int failed = v.failed != 0 ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, w.native_handle());
    if (failed != 0) {
      if (v.failed != 0) std::fprintf(stderr, "check failed: %s\n", v.message.c_str());
      return 1;
    }
    if (w.rank() == 0) std::printf("checked: %s (worst error %.2f·u·mag)\n", c.to_string().c_str(),
                                   v.worst_error);
  }
  bench::silent_reporter quiet;
  if (w.rank() == 0) benchmark::RunSpecifiedBenchmarks();
  else benchmark::RunSpecifiedBenchmarks(&quiet);
  benchmark::Shutdown();
  return 0;
}
