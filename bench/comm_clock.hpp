#pragma once
// Time spent communicating, measured through MPI's profiling interface: comm_clock.cpp defines
// the MPI calls through which `par::comm` communicates (Open MPI's collectives for the `mpi`
// backend, point-to-point for the `native` one and for pipelines, non-blocking calls and their
// completion); each forwards to its PMPI_ twin and, while the clock runs, adds the call's wall
// time. A non-blocking operation so counts only the time a rank waits for it (its exposed part),
// and a blocking receive the time the rank sits idle until its data arrives. A benchmark links
// shardcheck_bench_clock and runs the clock around the work it measures only.
namespace shardcheck::bench {

struct collective_clock {
  bool running = false;
  double seconds = 0;
};
extern collective_clock comm_clock;

}  // namespace shardcheck::bench
