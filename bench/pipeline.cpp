// The pipeline schedules under MPI: one training step (the forward and backward of every
// micro-batch, in schedule order) of a stack of p layers (at most 6), one per stage, for m
// micro-batches.
//
//   mpirun -n 2 --bind-to core build/bench/shardcheck_bench_pipeline
//
// Names: <schedule>/p=<p>/m=<m>. Per benchmark (medians over repetitions):
//   time             the slowest rank's step (manual time)
//   bubble           the share of the step a stage sits idle, averaged over the stages:
//                    1 − busy / step, where step is the slowest rank's time and busy a rank's own
//                    time outside MPI (blocking receives and waits for sends count as idle;
//                    comm_clock.hpp), so a stage that finishes early is idle until the step ends.
//                    Idle also holds the messages' own transfer time, which this shape keeps
//                    small against the products.
//   bubble_theory    (p − 1)/(m + p − 1), the idle share of equal stages under either schedule
//   peak_bytes       the largest peak memory of the step over the ranks (the memory meter), and
//   peak_bound       the cost model's bound for that rank: GPipe holds m micro-batches of
//                    activations, 1F1B at most min(m, p − s)
// Each (schedule, m) is checked once before timing: the whole backward property (dX and every dW
// against the single-device stack) on every rank, and its failure aborts the job.
//
// More ranks than cores share them (oversubscribed runs measure the machine, not the schedule);
// run it with as many ranks as cores.
#include <benchmark/benchmark.h>
#include <mpi.h>

#include <malloc.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <string>
#include <vector>

#include "mpi_bench.hpp"
#include "shardcheck/parallel/comm.hpp"
#include "shardcheck/parallel/kernel.hpp"
#include "shardcheck/parallel/memory.hpp"
#include "shardcheck/parallel/plan.hpp"
#include "shardcheck/parallel/registry.hpp"
#include "shardcheck/properties/harness.hpp"

namespace {

using namespace shardcheck;
using bench::comm_clock;

constexpr std::int64_t rows = 2048, width = 1024;
constexpr int iterations = 2, repetitions = 5;
par::comm* world = nullptr;

par::run_case make_case(const par::kernel& s, std::int64_t m) {
  par::run_case c;
  c.strategy = s.name();
  c.p = world->size();
  c.prob.M = rows;
  c.prob.N = c.prob.K = width;
  // One layer per stage, up to the kernel's most layers (further stages pass activations on).
  const auto layers = std::min<std::size_t>(static_cast<std::size_t>(c.p), s.info().max_layers);
  c.prob.hidden.assign(layers - 1, width);
  c.prob.act = activation::relu;
  c.prob.type = dtype::f64;
  c.mode = value_mode::uniform;
  c.seed = 7;
  c.params = {{"m", m}};
  par::complete_and_validate(s, c);
  return c;
}

void step(benchmark::State& state, const par::kernel& s, std::int64_t m) {
  const par::run_case c = make_case(s, m);
  // The backward property on this case first (every rank judges its own blocks).
  const prop::verdict v = prop::run_on_rank(prop::subject{&s, {}}, c, *world,
                                            static_cast<unsigned>(prop::property::backward));
  if (v.failed != 0) {
    std::fprintf(stderr, "shardcheck_bench_pipeline: %s\n  replay: %s\n", v.message.c_str(),
                 c.to_string().c_str());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  par::mesh grid(*world, s.mesh_dims(c), par::stack_options{c.backend, {}});
  const par::case_plan plan = par::plan_of(s, c, grid.coords());
  const prop::rank_inputs in = prop::inputs_of(plan, c);
  const std::int64_t peak_bound = s.cost(c, plan.coords).peak.value().backward;
  par::context ctx{grid};
  double idle_share = 0, peak = 0, bound = 0;
  for (auto _ : state) {
    par::any_matrix dx;
    std::vector<par::any_matrix> dws(in.ws.size());
    world->barrier();
    comm_clock = {true, 0.0};
    mem::peak_scope scope;
    const double t0 = MPI_Wtime();
    s.backward(ctx, c, par::backward_io{in.x, in.ws, in.dy, dx, dws});
    const double mine = MPI_Wtime() - t0;
    comm_clock.running = false;
    const double slowest = bench::max_over_ranks(*world, mine);
    state.SetIterationTime(slowest);
    // Idle: inside MPI, or done before the slowest rank (the step ends for everyone together).
    double idle = 1.0 - (mine - comm_clock.seconds) / slowest;
    par::check_mpi(
        MPI_Allreduce(MPI_IN_PLACE, &idle, 1, MPI_DOUBLE, MPI_SUM, world->native_handle()),
        "MPI_Allreduce");
    idle_share += idle / world->size();
    const auto peak_here = static_cast<double>(scope.peak());
    const double worst_peak = bench::max_over_ranks(*world, peak_here);
    if (worst_peak > peak) {
      peak = worst_peak;
      // The bound of the rank that peaks highest (a rank's bound counts its own stage).
      double mine_bound = peak_here == worst_peak ? static_cast<double>(peak_bound) : 0;
      bound = bench::max_over_ranks(*world, mine_bound);
    }
  }
  const double p = world->size();
  state.counters["bubble"] = idle_share / static_cast<double>(state.iterations());
  state.counters["bubble_theory"] = (p - 1) / (static_cast<double>(m) + p - 1);
  state.counters["peak_bytes"] = peak;
  state.counters["peak_bound"] = bound;
}

}  // namespace

int main(int argc, char** argv) {
  par::environment env(argc, argv);
  bench::keep_freed_memory();  // warm pages for every iteration alike
  par::comm w = par::comm::world();
  world = &w;
  const par::registry strategies = par::builtin_strategies();
  for (const char* name : {"pipeline_gpipe", "pipeline_1f1b"}) {
    const par::kernel& s = *strategies.find(name);
    for (std::int64_t m : {1, 2, 4, 8, 16}) {
      const std::string label =
          std::string(name) + "/p=" + std::to_string(w.size()) + "/m=" + std::to_string(m);
      benchmark::RegisterBenchmark(label.c_str(), [&s, m](benchmark::State& st) { step(st, s, m); })
          ->UseManualTime()
          ->Iterations(iterations)
          ->ReportAggregatesOnly(true)
          ->Unit(benchmark::kMillisecond);
    }
  }
  bench::initialize({argv, argv + argc}, repetitions);
  if (w.rank() == 0) {
    benchmark::RunSpecifiedBenchmarks();
  } else {
    bench::silent_reporter quiet;
    benchmark::RunSpecifiedBenchmarks(&quiet);
  }
  benchmark::Shutdown();
  return 0;
}
