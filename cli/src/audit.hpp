#pragma once
// `shardcheck audit`: a numerical-stability sweep. Every strategy × K (log-spaced up to 65,536,
// M and N small) × p (the divisors of the launched ranks) × dtype (what each kernel declares) ×
// backend (native, mpi) runs once; each element of Y, dX and dW is measured against the
// high-precision oracle (oracle.hpp), for the parallel result and for the single-device
// reference alike, in units of u·|X||W|ᵀ (the magnitude product of that tensor).
//
//   mpirun -n 4 shardcheck audit --out audit/
//
// It reports, per strategy, tensor and dtype: the max and mean error, the share of each tier's
// bound used (rigorous γ_k, statistical γ̃_k(λ), bound.hpp), the growth exponent of the error
// against K and against p (least squares in log-log), and a flag on what grows faster than the
// reference or than its chain predicts (the rule: docs/compare-audit-scale.md, "Auditing the
// numerics"). Writes audit.csv, audit.json, audit_summary.md and a plot per strategy (PNG and SVG).
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "shardcheck/parallel/kernel.hpp"
#include "shardcheck/properties/harness.hpp"

namespace CLI {
class App;
}

namespace shardcheck::audit {

struct options {
  std::string out;                      // directory for the files; empty: the summary only
  std::vector<std::string> strategies;  // empty: every single-layer kernel
  std::vector<std::int64_t> ks;         // empty: 16, 32, …, 65536 (powers of 2)
  std::vector<int> ps;                  // empty: the divisors of the launched ranks
  std::vector<std::string> dtypes;      // empty: what each kernel declares
  std::vector<std::string> backends;    // empty: native and mpi
  std::int64_t m = 8, n = 8;
  std::uint64_t seed = 1;
  std::string memory_limit;  // --memory-limit, e.g. "2GiB"; empty: 3/4 of the machine per rank
  bool quiet = false;
};

CLI::App* add_subcommand(CLI::App& app, options& o);

using finder = std::function<const prop::subject*(std::string_view)>;

// Runs the sweep under MPI (collective over MPI_COMM_WORLD). Bad input throws shardcheck::error
// (exit 2) on every rank alike. Returns 0, or 1 when some strategy is flagged (named on stdout).
[[nodiscard]] int run(const std::vector<const par::kernel*>& kernels, const finder& find,
                      const options& o);

}  // namespace shardcheck::audit
