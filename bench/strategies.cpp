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
//   GFLOP/s              2·M·N·K / time of the slowest rank.
//   comm_share           time inside MPI communication calls / iteration time, taking the rank
//                        that spent the most time in them (see `collective_clock`: measured
//                        through the MPI profiling interface, so it includes waiting for slower
//                        ranks).
//   bytes_moved          bytes sent + received by one rank in one forward, from the ledger
//                        (the largest over ranks).
//   peak_bytes           peak memory one forward allocates above its inputs, from the memory
//                        meter (the largest over ranks).
//   ideal_speedup_ratio  (reference time / strategy time) / p; 1 is a perfect p-fold speedup.
//                        Only when reference/<shape> ran earlier in the same process.
//
// Memory: strategies allocate their outputs on every call, and glibc serves blocks of 32 MiB and
// more with fresh mmap()s, so every iteration would first-touch (page-fault) its output again. In
// the micro-VMs this runs on a first touch costs about 15 µs per 4 KiB page (135 ms for a 32 MiB
// Y, against 1 ms to rewrite warm memory), which would swamp the GEMM. So by default the heap
// keeps freed memory (no mmap, no trimming), as a framework's caching allocator would, and a
// repeated allocation reuses warm pages. --shardcheck_cold_pages keeps glibc's defaults, to
// measure that cost.
//
// Each benchmark checks its result once before timing: sampled rows of this rank's Y block against
// a plain triple loop, within the error bound of reference/bound.hpp; a wrong result aborts the
// whole job with MPI_Abort and the case's replay line.
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <mpi.h>

#include <malloc.h>

#include <algorithm>
#include <climits>
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

#include "shardcheck/parallel/case.hpp"
#include "shardcheck/parallel/ledger.hpp"
#include "shardcheck/parallel/matrix.hpp"
#include "shardcheck/parallel/memory.hpp"
#include "shardcheck/parallel/mpi.hpp"
#include "shardcheck/parallel/registry.hpp"
#include "shardcheck/parallel/strategy.hpp"
#include "shardcheck/reference/check.hpp"
#include "shardcheck/reference/data.hpp"
#include "shardcheck/reference/gemm.hpp"

namespace sc = shardcheck;
namespace par = shardcheck::par;
namespace ref = shardcheck::ref;

// --- time spent communicating -------------------------------------------------------------------
// The communicator has no timing hook, so the benchmark uses MPI's own: the profiling interface.
// This binary defines the MPI calls through which `par::comm` communicates (Open MPI's collectives
// for the `mpi` backend, point-to-point for the `native` one, the non-blocking all-gather and its
// completion); each forwards to its PMPI_ twin and, while the clock runs, adds the call's wall
// time. So a non-blocking gather counts only the time the strategy waits for it (its exposed part).
// Only the strategy's forward runs with the clock on; the benchmark's own barrier and all-reduce
// do not count.
namespace {
struct collective_clock {
  bool running = false;
  double seconds = 0;
};
collective_clock comm_clock;

template <class F>
int timed(F&& call) {
  if (!comm_clock.running) return call();
  const double t0 = PMPI_Wtime();
  const int rc = call();
  comm_clock.seconds += PMPI_Wtime() - t0;
  return rc;
}
}  // namespace

extern "C" {
int MPI_Allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                   const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                   MPI_Comm comm) {
  return timed([&] {
    return PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                           comm);
  });
}
int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm) {
  return timed([&] { return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm); });
}
int MPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[],
                       MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return timed(
      [&] { return PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm); });
}
int MPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  return timed([&] { return PMPI_Bcast(buffer, count, datatype, root, comm); });
}
int MPI_Alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                  MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                  const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
  return timed([&] {
    return PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                          recvtype, comm);
  });
}
int MPI_Barrier(MPI_Comm comm) {
  return timed([&] { return PMPI_Barrier(comm); });
}
int MPI_Iallgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                    const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                    MPI_Comm comm, MPI_Request* request) {
  return timed([&] {
    return PMPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                            comm, request);
  });
}
int MPI_Send(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  return timed([&] { return PMPI_Send(buf, count, datatype, dest, tag, comm); });
}
int MPI_Recv(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
             MPI_Status* status) {
  return timed([&] { return PMPI_Recv(buf, count, datatype, source, tag, comm, status); });
}
int MPI_Sendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                 void* recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                 MPI_Comm comm, MPI_Status* status) {
  return timed([&] {
    return PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype,
                         source, recvtag, comm, status);
  });
}
int MPI_Isend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
              MPI_Request* request) {
  return timed([&] { return PMPI_Isend(buf, count, datatype, dest, tag, comm, request); });
}
int MPI_Irecv(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
              MPI_Request* request) {
  return timed([&] { return PMPI_Irecv(buf, count, datatype, source, tag, comm, request); });
}
int MPI_Wait(MPI_Request* request, MPI_Status* status) {
  return timed([&] { return PMPI_Wait(request, status); });
}
int MPI_Waitall(int count, MPI_Request requests[], MPI_Status* statuses) {
  return timed([&] { return PMPI_Waitall(count, requests, statuses); });
}
int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  return timed([&] { return PMPI_Test(request, flag, status); });
}
}  // extern "C"

namespace {

using matrix = par::matrix<double>;

struct shape {
  std::string name;  // M×N×K
  std::int64_t m, n, k;
  int iterations;    // per repetition, fixed (see the top of the file)
};
constexpr int repetitions = 5;
const std::vector<shape> shapes = {
    {"2048x2048x2048", 2048, 2048, 2048, 4},
    {"8192x512x512", 8192, 512, 512, 12},
};

constexpr std::uint64_t seed = 20240601;
constexpr auto mode = sc::value_mode::uniform;

[[nodiscard]] double flops(const shape& s) {
  return 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k);
}

[[nodiscard]] sc::problem problem_of(const shape& s) {
  sc::problem p;
  p.M = s.m;
  p.N = s.n;
  p.K = s.k;
  p.type = sc::dtype::f64;
  p.layout = sc::weight_layout::out_in;
  return p;
}

[[noreturn]] void abort_job(const std::string& message) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "shardcheck_bench: rank %d: %s\n", rank, message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

[[nodiscard]] matrix generate(ref::tensor_id id, const par::block& b) {
  matrix m(static_cast<std::size_t>(b.rows), static_cast<std::size_t>(b.cols));
  ref::fill_block<double>(mode, seed, static_cast<std::uint32_t>(id),
                          static_cast<std::uint64_t>(b.row0), static_cast<std::uint64_t>(b.rows),
                          static_cast<std::uint64_t>(b.col0), static_cast<std::uint64_t>(b.cols),
                          m.data.data());
  return m;
}

// Checks about 8 evenly spaced rows (first and last included) of y, this rank's block b of Y,
// against a plain triple loop over freshly generated inputs, within (γ_k_par + γ_K)·(|X||W|ᵀ)_ij.
// Returns an empty string when they pass.
[[nodiscard]] std::string check_y(const sc::problem& p, const par::block& b, const matrix& y,
                                  std::int64_t k_par) {
  std::ostringstream os;
  os.precision(17);
  if (static_cast<std::int64_t>(y.rows) != b.rows || static_cast<std::int64_t>(y.cols) != b.cols) {
    os << "Y block is " << y.rows << "×" << y.cols << ", its placement says " << b.rows << "×"
       << b.cols;
    return os.str();
  }
  if (b.rows == 0 || b.cols == 0) return {};
  const bool out_in = p.layout == sc::weight_layout::out_in;
  const auto cols = static_cast<std::size_t>(b.cols), k = static_cast<std::size_t>(p.K);
  const matrix w = out_in ? generate(ref::tensor_id::w, {b.col0, b.cols, 0, p.K})
                          : generate(ref::tensor_id::w, {0, p.K, b.col0, b.cols});
  const std::int64_t samples = std::min<std::int64_t>(b.rows, 8);
  std::vector<double> want(cols), mag(cols);
  ref::compare_options opt;
  opt.k_par = k_par;
  opt.k_ref = p.K;
  opt.k_mag = p.K;
  for (std::int64_t s = 0; s < samples; ++s) {
    const std::int64_t li = samples == 1 ? 0 : s * (b.rows - 1) / (samples - 1);
    const matrix x = generate(ref::tensor_id::x, {b.row0 + li, 1, 0, p.K});
    for (std::size_t j = 0; j < cols; ++j) {
      double sum = 0;
      for (std::size_t q = 0; q < k; ++q)
        sum += x.data[q] * (out_in ? w.data[j * k + q] : w.data[q * cols + j]);
      want[j] = sum;
    }
    ref::magnitude_forward<double>(p.layout, 1, cols, k, x.data.data(), w.data.data(), mag.data());
    const auto bad = ref::compare_block<double>(1, cols, y.row(static_cast<std::size_t>(li)), cols,
                                                want.data(), cols, mag.data(), cols, opt);
    if (!bad) continue;
    os << "Y[i=" << b.row0 + li << ", j=" << b.col0 + static_cast<std::int64_t>(bad->col)
       << "]: got " << bad->got << ", expected " << bad->expected << ", bound " << bad->bound
       << " (k_par=" << opt.k_par << ", k_ref=" << opt.k_ref << ")";
    if (!bad->reason.empty()) os << " [" << bad->reason << "]";
    return os.str();
  }
  return {};
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
    comm_clock = {true, 0.0};
    const double t0 = MPI_Wtime();
    work();
    double worst[2] = {MPI_Wtime() - t0, comm_clock.seconds};
    comm_clock.running = false;
    all_reduce_max(worst, 2);
    state.SetIterationTime(worst[0]);
    total += worst[0];
    in_collectives += worst[1];
  }
  return {total, in_collectives};
}

// Per-repetition seconds per iteration of reference/<shape>, for ideal_speedup_ratio.
std::map<std::string, std::vector<double>> reference_seconds;

[[nodiscard]] double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The case a strategy runs for a shape on p ranks: balanced partitions, default parameters.
// Throws invalid_problem when the strategy cannot run it.
[[nodiscard]] par::run_case case_for(const par::strategy& s, const shape& sh, int p) {
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
  matrix x, w, y;
};

struct strategy_setup {
  par::run_case c;
  par::mesh grid;
  par::any_matrix x, w, y;
  par::ledger log;
  double bytes_moved = 0, peak_bytes = 0;
  strategy_setup(par::run_case rc, const par::comm& world, std::vector<int> dims)
      : c(std::move(rc)), grid(world, std::move(dims)) {}
};

class bench_state {
 public:
  bench_state() : world_(par::comm::world()) {}

  void reference(benchmark::State& state, const shape& sh) {
    const sc::problem p = problem_of(sh);
    const auto m = static_cast<std::size_t>(p.M), n = static_cast<std::size_t>(p.N),
               k = static_cast<std::size_t>(p.K);
    const bool root = world_.rank() == 0;
    const std::string key = "reference/" + sh.name;
    if (key_ != key) {
      reset();
      key_ = key;
      ref_ = std::make_unique<reference_setup>();
      if (root) {
        ref_->x = generate(ref::tensor_id::x, {0, p.M, 0, p.K});
        ref_->w = generate(ref::tensor_id::w, {0, p.N, 0, p.K});
        ref_->y = matrix(m, n);
        ref::linear_forward<double>(p.layout, m, n, k, ref_->x.data.data(), ref_->w.data.data(),
                                    ref_->y.data.data());
        const std::string bad = check_y(p, {0, p.M, 0, p.N}, ref_->y, p.K);
        if (!bad.empty()) abort_job(key + ": the reference is wrong: " + bad);
      }
    }
    reference_setup& r = *ref_;
    const double total = timed_loop(state, [&] {
                           if (root)
                             ref::linear_forward<double>(p.layout, m, n, k, r.x.data.data(),
                                                         r.w.data.data(), r.y.data.data());
                         }).first;
    const double per_iteration = total / static_cast<double>(state.iterations());
    reference_seconds[sh.name].push_back(per_iteration);
    state.counters["GFLOP/s"] = flops(sh) / per_iteration / 1e9;
  }

  void strategy(benchmark::State& state, const par::strategy& s, const shape& sh) {
    const std::string key = s.name() + "/" + sh.name;
    if (key_ != key) {
      reset();
      key_ = key;
      setup_strategy(s, sh, key);
    }
    strategy_setup& st = *strat_;
    par::context ctx{st.grid, st.log};
    st.grid.attach(&st.log, false);  // the fingerprint check is verification, not the strategy
    const auto [total, in_collectives] = timed_loop(state, [&] {
      st.log.clear();
      s.forward(ctx, st.c, st.x, st.w, st.y);
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
    if (const auto it = reference_seconds.find(sh.name); it != reference_seconds.end())
      state.counters["ideal_speedup_ratio"] =
          median(it->second) / per_iteration / static_cast<double>(world_.size());
  }

  [[nodiscard]] const par::comm& world() const { return world_; }

  // Frees the cached inputs and communicators; must run before MPI_Finalize.
  void reset() {
    ref_.reset();
    strat_.reset();
    key_.clear();
  }

 private:
  void setup_strategy(const par::strategy& s, const shape& sh, const std::string& key) {
    par::run_case c = case_for(s, sh, world_.size());
    try {
      strat_ = std::make_unique<strategy_setup>(c, world_, s.mesh_dims(c));
      strategy_setup& st = *strat_;
      const std::vector<int> coords = st.grid.coords();
      st.x = generate(ref::tensor_id::x, par::block_of(s, c, par::tensor::x, coords));
      st.w = generate(ref::tensor_id::w, par::block_of(s, c, par::tensor::w, coords));
      par::context ctx{st.grid, st.log};
      st.grid.attach(&st.log, true);
      st.log.set_phase(par::phase::forward);
      {
        sc::mem::peak_scope scope;
        s.forward(ctx, c, st.x, st.w, st.y);
        st.peak_bytes = static_cast<double>(scope.peak());
      }
      st.grid.attach(nullptr, false);
      for (const par::ledger_entry& e : st.log.entries())
        st.bytes_moved += static_cast<double>(e.bytes_sent + e.bytes_received);
      const std::string bad = check_y(c.prob, par::block_of(s, c, par::tensor::y, coords),
                                      std::get<matrix>(st.y), s.cost(c, coords).chains.y);
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
  for (int i = 1; i < argc; ++i)
    cold_pages = cold_pages || std::string_view(argv[i]) == "--shardcheck_cold_pages";
  if (!cold_pages) {
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, INT_MAX);
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
        std::fprintf(stderr, "shardcheck_bench: random interleaving is not supported under MPI "
                             "(ranks would run benchmarks in different orders)\n");
      return 2;
    }
    if (a == "--benchmark_list_tests" || a == "--benchmark_list_tests=true") listing = true;
    if (a == "--shardcheck_cold_pages") continue;
    if (rank != 0 &&
        (starts_with(a, "--benchmark_out=") || starts_with(a, "--benchmark_out_format=")))
      continue;
    args.push_back(argv[i]);
  }
  int nargs = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&nargs, args.data());

  const par::registry strategies = par::builtin_strategies();
  bench_state bench;
  const auto configure = [](benchmark::internal::Benchmark* b, const shape& sh) {
    b->UseManualTime()
        ->Iterations(sh.iterations)
        ->Repetitions(repetitions)
        ->ReportAggregatesOnly(true)
        ->Unit(benchmark::kMillisecond);
  };
  for (const shape& sh : shapes) {
    configure(benchmark::RegisterBenchmark(
                  ("reference/" + sh.name).c_str(),
                  [&bench, &sh](benchmark::State& state) { bench.reference(state, sh); }),
              sh);
    for (const auto& s : strategies.all()) {
      try {
        (void)case_for(*s, sh, size);
      } catch (const std::exception& e) {
        if (rank == 0)
          std::fprintf(stderr, "shardcheck_bench: skipping %s/%s at p=%d: %s\n", s->name().c_str(),
                       sh.name.c_str(), size, e.what());
        continue;
      }
      const par::strategy& strategy = *s;
      configure(benchmark::RegisterBenchmark(
                    (s->name() + "/" + sh.name).c_str(),
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
  bench.reset();
  benchmark::Shutdown();
  return 0;
}
