// shardcheck_bench: every built-in strategy's forward pass, and the single-device reference on the
// same shapes, timed under MPI with Google Benchmark.
//
//   mpirun -n 2 shardcheck_bench [--benchmark_filter=...] [--benchmark_format=json] ...
//
// Timing: every iteration starts at a barrier, each rank times its own work with MPI_Wtime, and
// the iteration's time is the slowest rank's (MPI_Allreduce MAX), given to Google Benchmark as
// manual time. Iteration and repetition counts are fixed, never adaptive: an adaptive count is
// decided per rank and could differ between ranks, which deadlocks the collectives. For the same
// reason --benchmark_enable_random_interleaving is refused. Every rank runs every benchmark; only
// rank 0 reports (and writes --benchmark_out).
//
// Counters (medians over repetitions are reported):
//   GFLOP/s              2·M·N·K / time of the slowest rank; for a stack, 2·M·Σ d_{l−1}·d_l
//                        (two layers: 2·M·(K·H + H·N)).
//   comm_share           time inside MPI communication calls / iteration time, taking the rank
//                        that spent the most time in them (see `collective_clock`: measured
//                        through the MPI profiling interface, so it includes waiting for slower
//                        ranks).
//   bytes_moved          bytes sent + received by one rank in one forward, from the ledger
//                        (the largest over ranks).
//   peak_bytes           peak memory one forward allocates above its inputs, from the memory
//                        meter (the largest over ranks).
//   ideal_speedup_ratio  (reference time / strategy time) / p; 1 is a perfect p-fold speedup.
//                        Only when reference/<shape> ran earlier in the same process, or with
//                        --shardcheck_side_by_side: then every repetition of a strategy first
//                        times as many iterations of the reference (reference_ms) and the ratio
//                        is that repetition's, so reference and strategy alternate within the
//                        run (the median over repetitions is reported). It doubles the run time.
//
// Memory: strategies allocate their outputs on every call, and glibc serves blocks of 32 MiB and
// more with fresh mmap()s, so every iteration would first-touch (page-fault) its output again. In
// the micro-VMs this runs on a first touch costs about 15 µs per 4 KiB page (135 ms for a 32 MiB
// Y, against 1 ms to rewrite warm memory), which would swamp the GEMM. So by default the heap
// keeps freed memory (no mmap, no trimming), as a framework's caching allocator would, and a
// repeated allocation reuses warm pages. --shardcheck_cold_pages keeps glibc's defaults, to
// measure that cost.
//
// Stacks: a strategy that runs stacks runs each shape as a stack of L = p layers, clamped to the
// layer counts it takes (a pair: 2; a pipeline: one layer per stage), as a stack of L layers,
// every hidden width H = K and act=relu (named <shape>/H=K[,K…]/relu), with reference/<that name>
// the same stack on one rank (ref::stack_forward), so ideal_speedup_ratio compares like with like.
//
// Each benchmark checks its result once before timing: sampled rows of this rank's Y block against
// the verdict's reference of them (properties/verdict.hpp), within each element's rigorous bound
// for the strategy's chains per layer (a stack's through its layers); a wrong result aborts the
// whole job with MPI_Abort and the case's replay line. A kernel that claims no
// chains of additions has no bound to be checked against: it is skipped, with a note.
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <mpi.h>

#include <malloc.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mpi_bench.hpp"
#include "shardcheck/parallel/case.hpp"
#include "shardcheck/parallel/comm.hpp"
#include "shardcheck/parallel/kernel.hpp"
#include "shardcheck/parallel/ledger.hpp"
#include "shardcheck/parallel/matrix.hpp"
#include "shardcheck/parallel/memory.hpp"
#include "shardcheck/parallel/plan.hpp"
#include "shardcheck/parallel/registry.hpp"
#include "shardcheck/properties/verdict.hpp"
#include "shardcheck/reference/data.hpp"
#include "shardcheck/reference/gemm.hpp"
#include "shardcheck/reference/stack.hpp"

namespace sc = shardcheck;
namespace par = shardcheck::par;
namespace ref = shardcheck::ref;

namespace {

using matrix = par::matrix<double>;

struct shape {
  std::string name;  // M×N×K, and for a stack /H=…/relu
  std::int64_t m, n, k;
  int iterations;          // per repetition, fixed (see the top of the file)
  std::size_t layers = 1;  // a stack when > 1: every hidden width is K, act=relu
};
constexpr int repetitions = 5;
const std::vector<shape> shapes = {
    {"2048x2048x2048", 2048, 2048, 2048, 4},
    {"8192x512x512", 8192, 512, 512, 12},
};

constexpr std::uint64_t seed = 20240601;
constexpr auto mode = sc::value_mode::uniform;

// sh as a stack of `layers` layers (hidden widths K, act=relu); sh itself when layers is 1.
[[nodiscard]] shape stack_of(const shape& sh, std::size_t layers) {
  shape s = sh;
  s.layers = layers;
  if (layers <= 1) return s;
  s.name += "/H=";
  for (std::size_t l = 1; l < layers; ++l) {
    if (l > 1) s.name += ',';
    s.name += std::to_string(sh.k);
  }
  s.name += "/relu";
  return s;
}

[[nodiscard]] sc::problem problem_of(const shape& s) {
  sc::problem p;
  p.M = s.m;
  p.N = s.n;
  p.K = s.k;
  p.type = sc::dtype::f64;
  p.layout = sc::weight_layout::out_in;
  if (s.layers > 1) {
    p.hidden.assign(s.layers - 1, s.k);
    p.act = sc::activation::relu;
  }
  return p;
}

// 2·M·Σ_l d_{l−1}·d_l: 2·M·N·K for one layer, 2·M·(K·H + H·N) for two.
[[nodiscard]] double flops(const shape& s) {
  const std::vector<std::int64_t> d = problem_of(s).widths();
  double sum = 0;
  for (std::size_t l = 1; l < d.size(); ++l)
    sum += static_cast<double>(d[l - 1]) * static_cast<double>(d[l]);
  return 2.0 * static_cast<double>(s.m) * sum;
}

[[noreturn]] void abort_job(const std::string& message) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "shardcheck_bench: rank %d: %s\n", rank, message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

[[nodiscard]] matrix generate(std::uint32_t id, const par::block& b) {
  matrix m(static_cast<std::size_t>(b.rows), static_cast<std::size_t>(b.cols));
  ref::fill_block<double>(mode, seed, id, static_cast<std::uint64_t>(b.row0),
                          static_cast<std::uint64_t>(b.rows), static_cast<std::uint64_t>(b.col0),
                          static_cast<std::uint64_t>(b.cols), m.data.data());
  return m;
}
[[nodiscard]] matrix generate(ref::tensor_id id, const par::block& b) {
  return generate(static_cast<std::uint32_t>(id), b);
}

// Every weight of a stack in full: W_1 … W_L.
[[nodiscard]] std::vector<matrix> stack_weights(const sc::problem& p) {
  const std::vector<std::int64_t> d = p.widths();
  const bool out_in = p.layout == sc::weight_layout::out_in;
  std::vector<matrix> ws;
  for (std::size_t l = 0; l + 1 < d.size(); ++l)
    ws.push_back(
        generate(par::data_id_of(par::tensor_slot{par::tensor::w, l}),
                 out_in ? par::block{0, d[l + 1], 0, d[l]} : par::block{0, d[l], 0, d[l + 1]}));
  return ws;
}

// Checks about 8 evenly spaced rows (first and last included) of y, this rank's block b of Y,
// against the verdict's reference of those rows (prop::forward_reference: a stack's through its
// layers), each element within its rigorous bound for the chains per layer `chains` (the kernel's
// claimed chains). Returns an empty string when they pass.
[[nodiscard]] std::string check_y(const par::run_case& c, const par::block& b, const matrix& y,
                                  const std::vector<par::chain_lengths>& chains) {
  std::ostringstream os;
  if (static_cast<std::int64_t>(y.rows) != b.rows || static_cast<std::int64_t>(y.cols) != b.cols) {
    os << "Y block is " << y.rows << "×" << y.cols << ", its placement says " << b.rows << "×"
       << b.cols;
    return os.str();
  }
  if (b.rows == 0 || b.cols == 0) return {};
  if (chains.size() != c.prob.layers()) {
    os << "the cost model gives chains for " << chains.size() << " layer(s), the stack has "
       << c.prob.layers();
    return os.str();
  }
  const std::int64_t samples = std::min<std::int64_t>(b.rows, 8);
  par::block rows{b.row0, samples, b.col0, b.cols};
  matrix got(static_cast<std::size_t>(samples), y.cols);
  for (std::int64_t s = 0; s < samples; ++s) {
    const std::int64_t li = samples == 1 ? 0 : s * (b.rows - 1) / (samples - 1);
    rows.row_runs.push_back({b.row0 + li, 1});
    std::copy(y.row(static_cast<std::size_t>(li)), y.row(static_cast<std::size_t>(li)) + y.cols,
              got.row(static_cast<std::size_t>(s)));
  }
  const sc::prop::tolerance tol = sc::prop::tolerance_of(c, chains, par::tensor::y, {});
  const sc::prop::judgement j =
      sc::prop::judge_block(tol, got, sc::prop::forward_reference(c, rows, chains, 0));
  if (!j.first) return {};
  os << "Y[i=" << par::global_index(rows.row_runs, static_cast<std::int64_t>(j.first->row))
     << ", j=" << b.col0 + static_cast<std::int64_t>(j.first->col) << "]";
  return sc::prop::describe(j, tol, os.str());
}

// The single-device reference's case for sh: what check_y judges reference/<shape> by.
[[nodiscard]] par::run_case reference_case(const shape& sh) {
  par::run_case c;
  c.strategy = "reference";
  c.p = 1;
  c.prob = problem_of(sh);
  c.mode = mode;
  c.seed = seed;
  return c;
}

void all_reduce_max(double* values, int count) {
  par::check_mpi(MPI_Allreduce(MPI_IN_PLACE, values, count, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD),
                 "MPI_Allreduce (benchmark timing)");
}

// Runs work() once per iteration between a barrier and an all-reduce of the slowest rank's time.
// Returns the summed iteration times and the summed per-iteration maximum of collective time.
template <class Work>
std::pair<double, double> timed_loop(benchmark::State& state, Work&& work) {
  double total = 0, in_collectives = 0;
  for (auto _ : state) {
    par::check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier (benchmark timing)");
    sc::bench::comm_clock = {true, 0.0};
    const double t0 = MPI_Wtime();
    work();
    double worst[2] = {MPI_Wtime() - t0, sc::bench::comm_clock.seconds};
    sc::bench::comm_clock.running = false;
    all_reduce_max(worst, 2);
    state.SetIterationTime(worst[0]);
    total += worst[0];
    in_collectives += worst[1];
  }
  return {total, in_collectives};
}

// Per-repetition seconds per iteration of reference/<shape>, for ideal_speedup_ratio.
std::map<std::string, std::vector<double>> reference_seconds;

// The case a kernel runs for a shape on p ranks: balanced partitions, default parameters.
// Throws invalid_problem when the kernel cannot run it.
[[nodiscard]] par::run_case case_for(const par::kernel& s, const shape& sh, int p) {
  par::run_case c;
  c.strategy = s.name();
  c.p = p;
  c.prob = problem_of(sh);
  c.mode = mode;
  c.seed = seed;
  par::complete_and_validate(s, c);
  return c;
}

// What a benchmark keeps between its repetitions: inputs, mesh, and the one-time check. Rebuilt
// (collectively: every rank runs the same benchmarks in the same order) when the benchmark changes.
struct reference_setup {
  matrix x, y;
  std::vector<matrix> ws;  // W_1 … W_L (one for a single layer)
  std::vector<const double*> w_ptrs;
};

struct strategy_setup {
  par::run_case c;
  par::mesh grid;
  par::any_matrix x, y;
  std::vector<par::any_matrix> ws;  // this rank's blocks of W_1 … W_L
  par::ledger log;
  double bytes_moved = 0, peak_bytes = 0;
  strategy_setup(par::run_case rc, const par::comm& world, std::vector<int> dims)
      : c(std::move(rc)), grid(world, std::move(dims), par::stack_options{c.backend, {}}) {}
};

// The reference's inputs for sh, on rank 0 (the other ranks hold nothing), checked once.
[[nodiscard]] std::unique_ptr<reference_setup> make_reference(const shape& sh) {
  auto out = std::make_unique<reference_setup>();
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) return out;
  const sc::problem p = problem_of(sh);
  const auto m = static_cast<std::size_t>(p.M), n = static_cast<std::size_t>(p.N),
             k = static_cast<std::size_t>(p.K);
  const ref::stack_shape stack_shape{p.layout, p.widths(), p.act};
  reference_setup& r = *out;
  r.x = generate(ref::tensor_id::x, {0, p.M, 0, p.K});
  r.ws = stack_weights(p);
  for (const matrix& w : r.ws) r.w_ptrs.push_back(w.data.data());
  r.y = matrix(m, n);
  // The reference's own chains: the contraction lengths of every layer.
  const ref::stack_chains rc = ref::reference_chains(stack_shape, p.M);
  std::vector<par::chain_lengths> chains;
  for (std::size_t l = 0; l < stack_shape.layers(); ++l)
    chains.push_back({rc.h[l], rc.da[l], rc.dw[l]});
  if (p.layers() > 1)
    ref::stack_forward<double>(stack_shape, m, r.x.data.data(), r.w_ptrs, r.y.data.data(), nullptr);
  else
    ref::linear_forward<double>(p.layout, m, n, k, r.x.data.data(), r.w_ptrs.front(),
                                r.y.data.data());
  const std::string bad = check_y(reference_case(sh), {0, p.M, 0, p.N}, r.y, chains);
  if (!bad.empty()) abort_job("reference/" + sh.name + ": the reference is wrong: " + bad);
  return out;
}

// One reference forward on rank 0 (the others return at once).
void run_reference(reference_setup& r, const shape& sh) {
  if (r.x.data.empty() && r.ws.empty()) return;  // not rank 0
  const sc::problem p = problem_of(sh);
  const auto m = static_cast<std::size_t>(p.M), n = static_cast<std::size_t>(p.N),
             k = static_cast<std::size_t>(p.K);
  if (p.layers() > 1)
    ref::stack_forward<double>({p.layout, p.widths(), p.act}, m, r.x.data.data(), r.w_ptrs,
                               r.y.data.data(), nullptr);
  else
    ref::linear_forward<double>(p.layout, m, n, k, r.x.data.data(), r.w_ptrs.front(),
                                r.y.data.data());
}

// --shardcheck_side_by_side: every strategy repetition first times as many reference iterations
// (rank 0, the slowest-rank clock as for the strategy), so that each repetition's ratio compares
// the two a few seconds apart.
bool side_by_side = false;

class bench_state {
 public:
  bench_state() : world_(par::comm::world()) {}

  void reference(benchmark::State& state, const shape& sh) {
    const std::string key = "reference/" + sh.name;
    if (key_ != key) {
      reset();
      key_ = key;
      ref_ = make_reference(sh);
    }
    const double total = timed_loop(state, [&] { run_reference(*ref_, sh); }).first;
    const double per_iteration = total / static_cast<double>(state.iterations());
    reference_seconds[sh.name].push_back(per_iteration);
    state.counters["GFLOP/s"] = flops(sh) / per_iteration / 1e9;
  }

  void strategy(benchmark::State& state, const par::kernel& s, const shape& sh) {
    const std::string key = s.name() + "/" + sh.name;
    if (key_ != key) {
      reset();
      key_ = key;
      setup_strategy(s, sh, key);
    }
    strategy_setup& st = *strat_;
    par::context ctx{st.grid};
    st.grid.attach(&st.log, false);  // the fingerprint check is verification, not the kernel
    const par::forward_io io{st.x, st.ws, st.y};
    double reference_total = 0;
    if (side_by_side) {
      if (side_key_ != sh.name) {
        side_ref_.reset();
        side_ref_ = make_reference(sh);
        side_key_ = sh.name;
      }
      for (benchmark::IterationCount i = 0; i < state.max_iterations; ++i) {
        par::check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier (benchmark timing)");
        const double t0 = MPI_Wtime();
        run_reference(*side_ref_, sh);
        double t = MPI_Wtime() - t0;
        all_reduce_max(&t, 1);
        reference_total += t;
      }
    }
    const auto [total, in_collectives] = timed_loop(state, [&] {
      st.log.clear();
      s.forward(ctx, st.c, io);
    });
    st.grid.attach(nullptr, false);
    const double per_iteration = total / static_cast<double>(state.iterations());
    state.counters["GFLOP/s"] = flops(sh) / per_iteration / 1e9;
    state.counters["comm_share"] = total > 0 ? in_collectives / total : 0.0;
    const auto bytes = [](double v) {
      return benchmark::Counter(v, benchmark::Counter::kDefaults, benchmark::Counter::kIs1024);
    };
    state.counters["bytes_moved"] = bytes(st.bytes_moved);
    state.counters["peak_bytes"] = bytes(st.peak_bytes);
    if (side_by_side) {
      const double reference = reference_total / static_cast<double>(state.max_iterations);
      state.counters["reference_ms"] = reference * 1e3;
      state.counters["ideal_speedup_ratio"] =
          reference / per_iteration / static_cast<double>(world_.size());
    } else if (const auto it = reference_seconds.find(sh.name); it != reference_seconds.end()) {
      state.counters["ideal_speedup_ratio"] =
          sc::bench::median(it->second) / per_iteration / static_cast<double>(world_.size());
    }
  }

  [[nodiscard]] const par::comm& world() const { return world_; }

  // Frees the cached inputs and communicators; must run before MPI_Finalize.
  void reset() {
    ref_.reset();
    strat_.reset();
    key_.clear();
  }
  void reset_all() {
    reset();
    side_ref_.reset();
    side_key_.clear();
  }

 private:
  void setup_strategy(const par::kernel& s, const shape& sh, const std::string& key) {
    par::run_case c = case_for(s, sh, world_.size());
    try {
      strat_ = std::make_unique<strategy_setup>(c, world_, s.mesh_dims(c));
      strategy_setup& st = *strat_;
      const par::case_plan plan = par::plan_of(s, c, st.grid.coords());
      for (const par::tensor_plan& t : plan.tensors) {
        if (t.slot.t == par::tensor::x) st.x = generate(t.data_id, t.region);
        if (t.slot.t == par::tensor::w) st.ws.emplace_back(generate(t.data_id, t.region));
      }
      par::context ctx{st.grid};
      st.grid.attach(&st.log, true);
      st.log.set_phase(par::phase::forward);
      {
        sc::mem::peak_scope scope;
        s.forward(ctx, c, par::forward_io{st.x, st.ws, st.y});
        st.peak_bytes = static_cast<double>(scope.peak());
      }
      st.grid.attach(nullptr, false);
      for (const par::ledger_entry& e : st.log.entries())
        st.bytes_moved += static_cast<double>(e.bytes_sent + e.bytes_received);
      const par::block yb = plan[par::tensor::y].region;
      const par::claims cost = s.cost(c, plan.coords);
      if (!cost.chains) throw sc::invalid_problem("no chains of additions claimed on this rank");
      const std::string bad = check_y(c, yb, std::get<matrix>(st.y), *cost.chains);
      if (!bad.empty()) abort_job(key + ": wrong result: " + bad + "\n  replay: " + c.to_string());
    } catch (const std::exception& e) {
      abort_job(key + ": " + e.what() + "\n  replay: " + c.to_string());
    }
    double worst[2] = {strat_->bytes_moved, strat_->peak_bytes};
    all_reduce_max(worst, 2);
    strat_->bytes_moved = worst[0];
    strat_->peak_bytes = worst[1];
  }

  par::comm world_;
  std::string key_;
  std::unique_ptr<reference_setup> ref_;
  std::unique_ptr<strategy_setup> strat_;
  std::string side_key_;                       // the shape side_ref_ holds
  std::unique_ptr<reference_setup> side_ref_;  // --shardcheck_side_by_side's reference
};

// Rank 0's reporters print; every other rank reports through this one.
class silent_reporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

[[nodiscard]] bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

}  // namespace

int main(int argc, char** argv) {
  bool cold_pages = false;
  for (int i = 1; i < argc; ++i) {
    cold_pages = cold_pages || std::string_view(argv[i]) == "--shardcheck_cold_pages";
    side_by_side = side_by_side || std::string_view(argv[i]) == "--shardcheck_side_by_side";
  }
  if (!cold_pages) {
    sc::bench::keep_freed_memory();
  }
  par::environment env(argc, argv);
  openblas_set_num_threads(1);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  // Only rank 0 writes --benchmark_out; the other ranks must not even open (truncate) the file.
  std::vector<char*> args;
  bool listing = false;
  for (int i = 0; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (starts_with(a, "--benchmark_enable_random_interleaving") &&
        a != "--benchmark_enable_random_interleaving=false") {
      if (rank == 0)
        std::fprintf(stderr,
                     "shardcheck_bench: random interleaving is not supported under MPI "
                     "(ranks would run benchmarks in different orders)\n");
      return 2;
    }
    if (a == "--benchmark_list_tests" || a == "--benchmark_list_tests=true") listing = true;
    if (a == "--shardcheck_cold_pages" || a == "--shardcheck_side_by_side") continue;
    if (rank != 0 &&
        (starts_with(a, "--benchmark_out=") || starts_with(a, "--benchmark_out_format=")))
      continue;
    args.push_back(argv[i]);
  }
  sc::bench::initialize(std::move(args), repetitions);

  const par::registry strategies = par::builtin_strategies();
  bench_state bench;
  const auto configure = [](benchmark::internal::Benchmark* b, const shape& sh) {
    b->UseManualTime()
        ->Iterations(sh.iterations)
        ->ReportAggregatesOnly(true)
        ->Unit(benchmark::kMillisecond);
  };
  // A stack strategy runs one layer per rank where it can (a pipeline: one layer per stage),
  // within the layer counts it takes.
  const auto layers_of = [size](const par::kernel& s) {
    return std::clamp(static_cast<std::size_t>(size), s.info().min_layers, s.info().max_layers);
  };
  // Each shape once per layer count some strategy runs: 1, and stacks of L > 1.
  std::vector<std::size_t> layer_counts{1};
  for (const auto& s : strategies.all())
    if (std::find(layer_counts.begin(), layer_counts.end(), layers_of(*s)) == layer_counts.end())
      layer_counts.push_back(layers_of(*s));
  std::sort(layer_counts.begin(), layer_counts.end());
  std::vector<shape> all_shapes;  // registered benchmarks keep references into it
  for (const shape& base : shapes)
    for (std::size_t layers : layer_counts) all_shapes.push_back(stack_of(base, layers));
  for (const shape& sh : all_shapes) {
    configure(benchmark::RegisterBenchmark(
                  ("reference/" + sh.name).c_str(),
                  [&bench, &sh](benchmark::State& state) { bench.reference(state, sh); }),
              sh);
    for (const auto& s : strategies.all()) {
      if (layers_of(*s) != sh.layers) continue;  // it runs on the shape with its own count
      try {
        const par::run_case c = case_for(*s, sh, size);
        // The same decision on every rank: rank 0's claims.
        if (!s->cost(c, par::coords_of(0, s->mesh_dims(c))).chains)
          throw sc::invalid_problem(
              "it claims no chains of additions, so its result has no "
              "error bound to check it against");
      } catch (const std::exception& e) {
        if (rank == 0)
          std::fprintf(stderr, "shardcheck_bench: skipping %s/%s at p=%d: %s\n", s->name().c_str(),
                       sh.name.c_str(), size, e.what());
        continue;
      }
      const par::kernel& strategy = *s;
      configure(benchmark::RegisterBenchmark((s->name() + "/" + sh.name).c_str(),
                                             [&bench, &strategy, &sh](benchmark::State& state) {
                                               bench.strategy(state, strategy, sh);
                                             }),
                sh);
    }
  }

  if (rank == 0) {
    benchmark::RunSpecifiedBenchmarks();
  } else if (!listing) {
    silent_reporter silent;
    benchmark::RunSpecifiedBenchmarks(&silent);
  }
  bench.reset_all();
  benchmark::Shutdown();
  return 0;
}
