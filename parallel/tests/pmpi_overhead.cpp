// What the raw-MPI wrappers (pmpi.hpp) cost: a timed loop of 8-byte MPI_Allreduce through the
// wrapper against PMPI_Allreduce directly, outside a window (forwarding only) and inside one
// (recorded, with and without the fingerprint). Blocks of each run in turn; medians of the blocks'
// per-call times, the slowest rank's.
//   mpirun -n 2 build/parallel/pmpi_overhead [calls per block, default 20000] [blocks, default 15]
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "shardcheck/parallel/ledger.hpp"
#include "shardcheck/parallel/pmpi.hpp"

namespace {
namespace sc = shardcheck::par;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Seconds per call over `calls` calls of f, the slowest rank's.
template <class F>
double per_call(int calls, F f) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = PMPI_Wtime();
  for (int i = 0; i < calls; ++i) f();
  double t = (PMPI_Wtime() - t0) / calls;
  PMPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return t;
}
}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int calls = argc > 1 ? std::atoi(argv[1]) : 20000;
  const int blocks = argc > 2 ? std::atoi(argv[2]) : 15;
  MPI_Comm c = MPI_COMM_NULL;
  PMPI_Comm_dup(MPI_COMM_WORLD, &c);
  double x = 1;
  const auto wrapped = [&] { MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_SUM, c); };
  const auto direct = [&] { PMPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_SUM, c); };
  std::vector<double> t_direct, t_wrapped, t_recorded, t_fingerprinted;
  const sc::pmpi::tracked_comm tracked{c, 0};
  for (int b = 0; b < blocks; ++b) {
    t_direct.push_back(per_call(calls, direct));
    t_wrapped.push_back(per_call(calls, wrapped));
    for (const bool fingerprint : {false, true}) {
      sc::ledger log;
      const sc::pmpi::recording rec(log, fingerprint, std::span(&tracked, 1));
      // The ledger grows by one entry per call: clear it every 200 (below its reserve).
      const auto recorded = [&] {
        wrapped();
        if (log.entries().size() == 200) log.clear();
      };
      (fingerprint ? t_fingerprinted : t_recorded).push_back(per_call(calls, recorded));
    }
  }
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank == 0) {
    const double d = median(t_direct), w = median(t_wrapped);
    std::printf("8-byte MPI_Allreduce on %d ranks, median of %d blocks of %d calls (us per call)\n",
                size, blocks, calls);
    std::printf("  PMPI_Allreduce directly        %8.3f\n", d * 1e6);
    std::printf("  through the wrapper, no window %8.3f  (%+.3f)\n", w * 1e6, (w - d) * 1e6);
    std::printf("  recorded, no fingerprint       %8.3f\n", median(t_recorded) * 1e6);
    std::printf("  recorded and fingerprinted     %8.3f\n", median(t_fingerprinted) * 1e6);
  }
  PMPI_Comm_free(&c);
  MPI_Finalize();
  return 0;
}
