#pragma once
// `shardcheck scale`: weak scaling of the verification. Each strategy's shape grows with the
// worker count p so that a rank's shard stays fixed, and one case per p runs through the same
// harness as `verify`; every rank measures what checking it cost: its peak memory (the meter's,
// over the whole case) and its verification work (the reference blocks' peak, the input panels
// generated for them, the reference's and magnitudes' flops, the time). Both must stay flat as p
// grows: nothing of the global problem is held or checked on one rank.
//
//   mpirun -n 16 --oversubscribe --mca mpi_yield_when_idle 1
//       shardcheck scale --M 256 --N 256 --K 256 --out results/
//
// data_parallel at p = 4 runs M = 4·256, N = K = 256: rank r holds X's 256 rows, W, and checks
// Y's and dX's 256 rows and its share of dW (the products over its own 256 rows of the batch).
#include <cstdint>
#include <string>
#include <vector>

#include "compare.hpp"

namespace CLI {
class App;
}

namespace shardcheck::scale {

struct options {
  std::int64_t m = 0, n = 0, k = 0;  // the shard unit: the shape at p = 1
  std::vector<std::string> strategies;
  std::string grow;  // --grow: the dimensions that grow with p, e.g. "M" or "MK" (all named)
  std::string workers = "1,2,4,8,16";  // --p: the worker counts, each at most the ranks launched
  std::string dtype = "f64";
  std::string check = "auto";  // --check: how outputs are judged (verify --check)
  std::string out;             // directory for scale.json and the plots; empty: none
  std::string memory_limit;    // --memory-limit, e.g. "2GiB"; empty: 3/4 of the machine per rank
  bool quiet = false;
};

CLI::App* add_subcommand(CLI::App& app, options& o);

// Collective over MPI_COMM_WORLD; bad input throws shardcheck::error (exit 2) on every rank.
// Returns 0, or 1 when a case failed a property (named on stdout).
[[nodiscard]] int run(const std::vector<const par::kernel*>& kernels, const compare::finder& find,
                      const options& o);

}  // namespace shardcheck::scale
