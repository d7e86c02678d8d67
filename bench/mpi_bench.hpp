#pragma once
// What every benchmark under MPI shares: the slowest rank's wall time of a step (the manual time
// of an iteration), a max over ranks, a median, the time inside MPI calls, and a reporter for the
// ranks that do not report (only rank 0 prints; every rank runs the same iterations, so that their
// collectives match).
#include <benchmark/benchmark.h>
#include <malloc.h>
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <string>
#include <string_view>
#include <vector>

#include "comm_clock.hpp"
#include "shardcheck/parallel/comm.hpp"

namespace shardcheck::bench {

// Freed memory stays with the heap (no mmap, no trimming), as a framework's caching allocator
// keeps it: a buffer allocated every iteration reuses warm pages instead of first-touching fresh
// ones (about 15 µs per 4 KiB page on these VMs, 60 ms for 16 MiB, which would swamp a GEMM).
// Call it first thing in main, before any allocation it should govern.
inline void keep_freed_memory() {
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
}

// benchmark::Initialize on `args` (argv[0] first), with --benchmark_repetitions=n added unless
// they hold one: the default count, which the flag on the command line overrides (a benchmark's
// own Repetitions() would override the flag instead). Every rank gets the same command line, so
// every rank runs the same repetitions.
inline void initialize(std::vector<char*> args, int n) {
  static std::string flag;
  flag = "--benchmark_repetitions=" + std::to_string(n);
  if (std::none_of(args.begin(), args.end(), [](const char* a) {
        return std::string_view(a).rfind("--benchmark_repetitions", 0) == 0;
      }))
    args.push_back(flag.data());
  int count = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&count, args.data());
}

// \note collective over c.
inline double max_over_ranks(par::comm& c, double v) {
  par::check_mpi(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_MAX, c.native_handle()),
                 "MPI_Allreduce");
  return v;
}

[[nodiscard]] inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Wall time of f on the slowest rank, the ranks starting together. \note collective over c.
template <class F>
double timed(par::comm& c, F&& f) {
  c.barrier();
  const double t0 = MPI_Wtime();
  f();
  return max_over_ranks(c, MPI_Wtime() - t0);
}

class silent_reporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

}  // namespace shardcheck::bench
