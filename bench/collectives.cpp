// Collectives in the style of nccl-tests: per collective, sizes 8 B to 64 MiB, Open MPI's built-ins
// (`mpi`) beside shardcheck's own (`native`), in one run so the two meet the same machine state.
//
//   name        <collective>/<backend>/<bytes>    bytes as nccl-tests counts them: the whole
//               buffer (all-reduce, broadcast: n; all-gather, all-to-all: the receive buffer;
//               reduce-scatter: the send buffer)
//   time        slowest rank per iteration (MPI_Allreduce MAX of MPI_Wtime spans), manual time
//   algbw_GBps  bytes / time
//   busbw_GBps  algbw × 2(p−1)/p (all-reduce), × (p−1)/p (all-gather, reduce-scatter, all-to-all),
//               × 1 (broadcast): the bandwidth each link carries, comparable across p
//   #wrong      elements differing from the exact result, over all ranks, checked once before
//   timing
//
// Every rank runs identical iteration counts (fixed Iterations; 3 repetitions, medians reported,
// unless --benchmark_repetitions / --benchmark_report_aggregates_only say otherwise: every rank
// gets the same command line); only rank 0 prints.
// Run: mpirun -n 2 build/bench/shardcheck_bench_collectives
#include <benchmark/benchmark.h>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "mpi_bench.hpp"
#include "shardcheck/parallel/comm.hpp"

namespace {

using shardcheck::par::backend;
using shardcheck::par::collective;
using shardcheck::par::comm;
using shardcheck::par::comm_handle;
using elem = float;

struct collective_spec {
  collective kind;
  double bus_factor(int p) const {
    if (kind == collective::broadcast) return 1.0;
    const double f = p > 1 ? static_cast<double>(p - 1) / p : 0.0;
    return kind == collective::all_reduce ? 2 * f : f;
  }
};

// The buffers of one collective of `total` elements on this rank, with values whose sums are exact.
struct buffers {
  std::vector<elem> in, out, expected;
  std::vector<std::int64_t> counts, recv_counts;
};

elem value(int rank, std::int64_t i) { return static_cast<elem>((rank + 1) * 4 + i % 7); }

buffers make_buffers(collective kind, std::int64_t total, const comm& c) {
  const int p = c.size(), r = c.rank();
  buffers b;
  for (int q = 0; q < p; ++q) b.counts.push_back(total / p + (q < total % p ? 1 : 0));
  std::int64_t my_off = 0;
  for (int q = 0; q < r; ++q) my_off += b.counts[static_cast<std::size_t>(q)];
  const std::int64_t mine = b.counts[static_cast<std::size_t>(r)];
  const auto n = static_cast<std::size_t>(total);
  switch (kind) {
    case collective::all_reduce:
    case collective::broadcast:
      b.out.resize(n);
      b.expected.resize(n);
      for (std::size_t i = 0; i < n; ++i) {
        elem sum = 0;
        for (int q = 0; q < p; ++q) sum += value(q, static_cast<std::int64_t>(i));
        b.expected[i] =
            kind == collective::broadcast ? value(0, static_cast<std::int64_t>(i)) : sum;
      }
      break;
    case collective::all_gather:
      b.out.resize(n);
      b.expected.resize(n);
      for (int q = 0, at = 0; q < p; ++q)
        for (std::int64_t i = 0; i < b.counts[static_cast<std::size_t>(q)]; ++i, ++at)
          b.expected[static_cast<std::size_t>(at)] = value(q, i);
      break;
    case collective::reduce_scatter:
      b.in.resize(n);
      for (std::size_t i = 0; i < n; ++i) b.in[i] = value(r, static_cast<std::int64_t>(i));
      b.out.resize(static_cast<std::size_t>(mine));
      for (std::int64_t i = 0; i < mine; ++i) {
        elem sum = 0;
        for (int q = 0; q < p; ++q) sum += value(q, my_off + i);
        b.expected.push_back(sum);
      }
      break;
    case collective::all_to_all:
      // Rank r sends block q (counts[q] elements) to rank q and receives counts[r] from each.
      b.in.resize(n);
      for (std::size_t i = 0; i < n; ++i) b.in[i] = value(r, static_cast<std::int64_t>(i));
      b.recv_counts.assign(static_cast<std::size_t>(p), mine);
      b.out.resize(static_cast<std::size_t>(mine * p));
      for (int q = 0; q < p; ++q)
        for (std::int64_t i = 0; i < mine; ++i) b.expected.push_back(value(q, my_off + i));
      break;
    default: break;
  }
  return b;
}

// Puts the inputs in place (in-place collectives overwrite them) and runs one call.
void reset(collective kind, buffers& b, const comm& c) {
  if (kind == collective::all_reduce || kind == collective::broadcast) {
    for (std::size_t i = 0; i < b.out.size(); ++i)
      b.out[i] = kind == collective::broadcast && c.rank() != 0
                     ? elem{0}
                     : value(c.rank(), static_cast<std::int64_t>(i));
  } else if (kind == collective::all_gather) {
    std::fill(b.out.begin(), b.out.end(), elem{0});
    std::int64_t at = 0;
    for (int q = 0; q < c.rank(); ++q) at += b.counts[static_cast<std::size_t>(q)];
    for (std::int64_t i = 0; i < b.counts[static_cast<std::size_t>(c.rank())]; ++i)
      b.out[static_cast<std::size_t>(at + i)] = value(c.rank(), i);
  }
}

void run(collective kind, buffers& b, comm& c) {
  switch (kind) {
    case collective::all_reduce: c.all_reduce_sum<elem>(b.out); break;
    case collective::all_gather: c.all_gather<elem>(b.out, b.counts); break;
    case collective::reduce_scatter: c.reduce_scatter_sum<elem>(b.in, b.out, b.counts); break;
    case collective::broadcast: c.broadcast<elem>(b.out, 0); break;
    case collective::all_to_all: c.all_to_all<elem>(b.in, b.counts, b.out, b.recv_counts); break;
    default: break;
  }
}

void bench_collective(benchmark::State& state, collective_spec spec, comm* c, std::int64_t bytes) {
  const std::int64_t total = std::max<std::int64_t>(bytes / std::int64_t{sizeof(elem)}, 1);
  buffers b = make_buffers(spec.kind, total, *c);
  reset(spec.kind, b, *c);
  run(spec.kind, b, *c);
  long long wrong = 0;
  for (std::size_t i = 0; i < b.expected.size(); ++i) wrong += b.out[i] != b.expected[i] ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG_LONG, MPI_SUM, c->native_handle());
  double elapsed = 0;
  for (auto _ : state) {
    MPI_Barrier(c->native_handle());
    const double t0 = MPI_Wtime();
    run(spec.kind, b, *c);
    double t = MPI_Wtime() - t0;
    MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, c->native_handle());
    state.SetIterationTime(t);
    elapsed += t;
  }
  const double algbw = elapsed > 0 ? static_cast<double>(bytes) *
                                         static_cast<double>(state.iterations()) / elapsed / 1e9
                                   : 0.0;
  state.counters["algbw_GBps"] = algbw;
  state.counters["busbw_GBps"] = algbw * spec.bus_factor(c->size());
  state.counters["#wrong"] = static_cast<double>(wrong);
}

// Identical on every rank: depends on the size only.
benchmark::IterationCount iterations_for(std::int64_t bytes) {
  return std::clamp<std::int64_t>((std::int64_t{256} << 20) / bytes, 5, 1000);
}

}  // namespace

int main(int argc, char** argv) {
  shardcheck::par::environment env(argc, argv);
  {
    comm world = comm::world();
    // One communicator per backend, each over its own duplicate of the world.
    const auto over = [](backend b) {
      MPI_Comm dup = MPI_COMM_NULL;
      shardcheck::par::check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &dup), "MPI_Comm_dup");
      return comm(comm_handle(dup), shardcheck::par::stack_options{b, {}});
    };
    comm on_mpi = over(backend::mpi);
    comm on_native = over(backend::native);
    const std::pair<backend, comm*> backends[] = {{backend::mpi, &on_mpi},
                                                  {backend::native, &on_native}};
    std::vector<std::int64_t> sizes;
    for (std::int64_t s = 8; s <= (std::int64_t{64} << 20); s *= 4) sizes.push_back(s);
    sizes.push_back(std::int64_t{64} << 20);
    for (collective kind :
         {collective::all_reduce, collective::all_gather, collective::reduce_scatter,
          collective::broadcast, collective::all_to_all})
      for (std::int64_t bytes : sizes)
        for (const auto& [b, c] : backends) {
          const std::string name = std::string(shardcheck::par::to_string(kind)) + "/" +
                                   std::string(shardcheck::par::to_string(b)) + "/" +
                                   std::to_string(bytes);
          benchmark::RegisterBenchmark(name.c_str(), bench_collective, collective_spec{kind}, c,
                                       bytes)
              ->UseManualTime()
              ->Unit(benchmark::kMicrosecond)
              ->Iterations(iterations_for(bytes));
        }
    // Defaults first, so that the same flags given on the command line win.
    std::string repetitions = "--benchmark_repetitions=3";
    std::string aggregates = "--benchmark_report_aggregates_only=true";
    std::vector<char*> args(argv, argv + argc);
    args.insert(args.begin() + 1, {repetitions.data(), aggregates.data()});
    int count = static_cast<int>(args.size());
    benchmark::Initialize(&count, args.data());
    if (world.rank() == 0) {
      benchmark::RunSpecifiedBenchmarks();
    } else {
      shardcheck::bench::silent_reporter quiet;
      benchmark::RunSpecifiedBenchmarks(&quiet);
    }
    benchmark::Shutdown();
  }
  return 0;
}
