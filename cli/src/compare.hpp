#pragma once
// `shardcheck compare`: every strategy that fits a shape, timed side by side with the
// single-device reference on one training step (forward + backward), with its communication,
// memory, bytes and error, and the cost model's predicted time beside the measured one.
//
//   mpirun -n 2 shardcheck compare --M 2048 --N 2048 --K 2048 --out results/
//
// Repetitions alternate the strategies (rep r runs them all, starting one later each rep), so
// that drift of a shared machine favours none; each figure is the median over repetitions of the
// slowest rank's time.
#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "shardcheck/parallel/kernel.hpp"
#include "shardcheck/properties/harness.hpp"

namespace CLI {
class App;
}

namespace shardcheck::compare {

struct options {
  std::int64_t m = 0, n = 0, k = 0;
  std::string hidden;  // --H: a stack's hidden widths, e.g. 2048 or 512,256
  std::string act = "relu";
  std::string dtype = "f64";
  std::string reduce = "f32";  // bf16 / f16: the dtype partial sums travel in (acc is f32)
  std::string backend = "mpi";
  std::vector<std::string> strategies;  // empty: every one that fits
  std::string memory_per_rank;          // e.g. "512MiB"; empty: no memory budget to choose under
  std::string memory_limit;             // e.g. "2GiB"; empty: 3/4 of the machine per rank
  int reps = 5;
  std::string out;               // directory for compare.json and the plots; empty: none
  double alpha = -1, beta = -1;  // seconds per message, bytes per second; < 0: probed
  double gemm_rate = -1;         // flop/s; < 0: probed
  bool quiet = false;
};

// Adds the subcommand and its options to app.
CLI::App* add_subcommand(CLI::App& app, options& o);

// What --strategy names: a kernel, or a mutant cell (its fault layers around every comm); nullptr
// when nothing has that name.
using finder = std::function<const prop::subject*(std::string_view)>;

// Runs it under MPI on the given kernels (all that fit, by default) or those --strategy names
// (collective over MPI_COMM_WORLD). Bad input throws shardcheck::error (exit 2) on every rank
// alike. Returns the exit status: 0, or 1 when a strategy's outputs broke their error bound, its
// ledger differed from its claims or its peak went above its bound (each named on stdout).
[[nodiscard]] int run(const std::vector<const par::kernel*>& kernels, const finder& find,
                      const options& o);

// Shared with `shardcheck scale`: the machine a report ran on (host, CPU, cores, memory, load
// average, ranks, Open MPI's coll settings).
[[nodiscard]] nlohmann::ordered_json machine_json(int ranks);

}  // namespace shardcheck::compare
