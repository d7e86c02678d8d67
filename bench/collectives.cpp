// Collectives in the style of nccl-tests: per collective, sizes 8 B to 64 MiB, Open MPI's built-ins
// (`mpi`) beside shardcheck's own (`native`), alternated repetition by repetition so that drift in
// the machine's load cannot favour one: repetition r runs mpi then native when r is even, native
// then mpi when odd. One line per collective and size:
//
//   bytes       as nccl-tests counts them: the whole buffer (all-reduce, broadcast: n;
//               all-gather, all-to-all: the receive buffer; reduce-scatter: the send buffer)
//   mpi_us      median over repetitions of the seconds per call (each call starts at a barrier;
//   native_us   its time is the slowest rank's), in µs
//   *_busbw     bytes / time × 2(p−1)/p (all-reduce), × (p−1)/p (all-gather, reduce-scatter,
//               all-to-all), × 1 (broadcast): GB/s each link carries, comparable across p
//   ratio       native busbw / mpi busbw (mpi_us / native_us); ≥ 1: native as fast or faster
//   #wrong      elements differing from the exact result, both backends, all ranks, checked once
//
// Every rank runs identical iteration counts (256 MiB / bytes, clamped to [5, 1000], per
// repetition); only rank 0 prints.
// Run: mpirun -n 2 --bind-to core build/bench/shardcheck_bench_collectives
//        [--repetitions N (5)] [--collective all_reduce|all_gather|reduce_scatter|broadcast|
//        all_to_all] [--min-bytes B] [--max-bytes B]
// Exit codes: 0 done, 2 bad usage.
#include <mpi.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
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

// Identical on every rank: depends on the size only.
std::int64_t iterations_for(std::int64_t bytes) {
  return std::clamp<std::int64_t>((std::int64_t{256} << 20) / bytes, 5, 1000);
}

// Seconds per call on the slowest rank, over `iterations` calls each started at a barrier.
// \note collective over c.
double time_calls(collective kind, buffers& b, comm& c, std::int64_t iterations) {
  double elapsed = 0;
  for (std::int64_t i = 0; i < iterations; ++i) {
    shardcheck::par::check_mpi(MPI_Barrier(c.native_handle()), "MPI_Barrier");
    const double t0 = MPI_Wtime();
    run(kind, b, c);
    double t = MPI_Wtime() - t0;
    shardcheck::par::check_mpi(
        MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, c.native_handle()),
        "MPI_Allreduce");
    elapsed += t;
  }
  return elapsed / static_cast<double>(iterations);
}

// Elements differing from the exact result after one call, over all ranks.
long long wrong_after_one_call(collective kind, buffers& b, comm& c) {
  reset(kind, b, c);
  run(kind, b, c);
  long long wrong = 0;
  for (std::size_t i = 0; i < b.expected.size(); ++i) wrong += b.out[i] != b.expected[i] ? 1 : 0;
  shardcheck::par::check_mpi(
      MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG_LONG, MPI_SUM, c.native_handle()),
      "MPI_Allreduce");
  return wrong;
}

struct options {
  int repetitions = 5;
  std::string only;  // a collective's name, or empty: all
  std::int64_t min_bytes = 8, max_bytes = std::int64_t{64} << 20;
};

[[noreturn]] void usage(int rank, const std::string& why) {
  if (rank == 0)
    std::fprintf(stderr,
                 "shardcheck_bench_collectives: %s\n"
                 "usage: shardcheck_bench_collectives [--repetitions N] [--collective NAME]\n"
                 "       [--min-bytes B] [--max-bytes B]\n",
                 why.c_str());
  MPI_Finalize();
  std::exit(2);
}

options parse(int argc, char** argv, int rank) {
  options o;
  const auto number = [&](int& i, std::int64_t lo, std::int64_t hi) {
    if (i + 1 >= argc) usage(rank, std::string(argv[i]) + " needs a value");
    const std::string v = argv[++i];
    std::int64_t x = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
    if (ec != std::errc() || end != v.data() + v.size() || x < lo || x > hi)
      usage(rank, std::string(argv[i - 1]) + " " + v + ": expected an integer in [" +
                      std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return x;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--repetitions")
      o.repetitions = static_cast<int>(number(i, 1, 1000));
    else if (a == "--min-bytes")
      o.min_bytes = number(i, 4, std::int64_t{1} << 30);
    else if (a == "--max-bytes")
      o.max_bytes = number(i, 4, std::int64_t{1} << 30);
    else if (a == "--collective") {
      if (i + 1 >= argc) usage(rank, "--collective needs a value");
      o.only = argv[++i];
      if (o.only != "all_reduce" && o.only != "all_gather" && o.only != "reduce_scatter" &&
          o.only != "broadcast" && o.only != "all_to_all")
        usage(rank, "--collective " + o.only + ": not a benchmarked collective");
    } else
      usage(rank, "unknown argument '" + std::string(a) + "'");
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  shardcheck::par::environment env(argc, argv);
  {
    comm world = comm::world();
    const options o = parse(argc, argv, world.rank());
    // One communicator per backend, each over its own duplicate of the world.
    const auto over = [](backend b) {
      MPI_Comm dup = MPI_COMM_NULL;
      shardcheck::par::check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &dup), "MPI_Comm_dup");
      return comm(comm_handle(dup), shardcheck::par::stack_options{b, {}});
    };
    comm on_mpi = over(backend::mpi);
    comm on_native = over(backend::native);
    std::vector<std::int64_t> sizes;
    for (std::int64_t s = 8; s <= (std::int64_t{64} << 20); s *= 4) sizes.push_back(s);
    sizes.push_back(std::int64_t{64} << 20);
    const bool root = world.rank() == 0;
    if (root)
      std::printf("%-15s %10s %6s %12s %12s %10s %10s %7s %7s\n", "collective", "bytes", "iters",
                  "mpi_us", "native_us", "mpi_busbw", "nat_busbw", "ratio", "#wrong");
    for (collective kind :
         {collective::all_reduce, collective::all_gather, collective::reduce_scatter,
          collective::broadcast, collective::all_to_all}) {
      const std::string name(shardcheck::par::to_string(kind));
      if (!o.only.empty() && o.only != name) continue;
      for (std::int64_t bytes : sizes) {
        if (bytes < o.min_bytes || bytes > o.max_bytes) continue;
        const std::int64_t total = std::max<std::int64_t>(bytes / std::int64_t{sizeof(elem)}, 1);
        buffers on[2] = {make_buffers(kind, total, on_mpi), make_buffers(kind, total, on_native)};
        comm* comms[2] = {&on_mpi, &on_native};
        const long long wrong = wrong_after_one_call(kind, on[0], on_mpi) +
                                wrong_after_one_call(kind, on[1], on_native);
        const std::int64_t iterations = iterations_for(bytes);
        std::vector<double> seconds[2];
        // Repetition r runs mpi then native when r is even, native then mpi when odd.
        for (int r = 0; r < o.repetitions; ++r)
          for (int turn = 0; turn < 2; ++turn) {
            const int b = (turn + r) % 2;
            seconds[b].push_back(time_calls(kind, on[b], *comms[b], iterations));
          }
        if (!root) continue;
        const double t_mpi = shardcheck::bench::median(seconds[0]),
                     t_native = shardcheck::bench::median(seconds[1]);
        const double f = collective_spec{kind}.bus_factor(world.size());
        const auto busbw = [&](double t) {
          return t > 0 ? static_cast<double>(bytes) / t / 1e9 * f : 0.0;
        };
        std::printf("%-15s %10lld %6lld %12.1f %12.1f %10.3f %10.3f %7.2f %7lld\n", name.c_str(),
                    static_cast<long long>(bytes), static_cast<long long>(iterations), t_mpi * 1e6,
                    t_native * 1e6, busbw(t_mpi), busbw(t_native),
                    t_native > 0 ? t_mpi / t_native : 0.0, wrong);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
