#pragma once
// RapidCheck generators for cases: shapes with edge cases weighted (0, 1, primes, fewer rows than
// workers), worker counts up to the launched ranks, partitions with uneven and empty parts, the
// strategy's parameters, dtype, layout, value mode, seed, collectives backend.
#include <rapidcheck.h>

#include <map>
#include <optional>
#include <string>

#include "shardcheck/parallel/kernel.hpp"

namespace shardcheck::prop {

[[nodiscard]] rc::Gen<std::int64_t> dimension(int p);
// The sizes where defects hide, one dimension at a time: a value in [65, max] drawn evenly over
// its scales (log-uniform), max = large_k for K and large_mn for M or N. case_for draws one of a
// case's dimensions with it about one case in large_one_in, the others then at most
// small_beside(big) so that M·N·K ≤ large_flops: K = 65,536 leaves M, N ≤ 5; N = 8192 leaves
// M, K ≤ 16. Element counts of Y (M·N), W and dW (N·K) then cross every point where a native
// collective changes algorithm: an all-reduce's 1024 elements (recursive doubling → ring), a
// broadcast's 16,384 (binomial tree → chain), a ring's segment of 1 MiB of scratch per chunk.
inline constexpr std::int64_t large_k = 65536, large_mn = 8192, large_flops = std::int64_t{1} << 21;
inline constexpr int large_one_in = 64;
inline constexpr std::int64_t large_collectives = 512;
[[nodiscard]] rc::Gen<std::int64_t> large_dimension(std::int64_t max);
[[nodiscard]] std::int64_t small_beside(std::int64_t big);
[[nodiscard]] rc::Gen<par::partition> partition_of(std::int64_t n, int parts);
// A value of a strategy parameter; wide ranges are drawn evenly over scales.
[[nodiscard]] rc::Gen<std::int64_t> parameter(const par::param_spec& ps);
// One of p's divisors, each equally likely (a divides_p parameter: the rows of a 2D mesh).
[[nodiscard]] rc::Gen<std::int64_t> divisor_of(int p);
// A pinned dimension: drawn from lo … hi (one value when lo = hi); shrinking goes toward lo.
struct dim_range {
  std::int64_t lo = 0, hi = 0;
};
// What a run pins instead of drawing: the backend, the worker count, strategy parameters (e.g.
// a mesh's factors, dp=2 tp=2 on 8 ranks: pp = 2), dimensions (a case the rest drawn cannot take
// there, e.g. exact mode that would round, is drawn again as a declined one).
struct case_pins {
  std::optional<par::backend_spec> backend;                // with its algorithm choices
  par::check_method check = par::check_method::automatic;  // every case's (verify --check)
  std::optional<int> p;
  std::map<std::string, std::int64_t> params;
  // M, N, K: with any pinned, no dimension is drawn large beside the others.
  std::optional<dim_range> m, n, k;
};
// What case_for drew for a kernel: the cases it took and those it declined (its preconditions,
// kernel.hpp), with the reason of the first declined.
struct draw_tally {
  std::int64_t accepted = 0, declined = 0;
  std::string example;
};
// A declined case is drawn again, up to max_declined_in_a_row times for one case; a kernel that
// declined every one of its first max_declined_in_all cases gives up at once. Either way the case
// fails to generate (rc::GenerationFailure: RapidCheck discards it, and gives up after too many).
inline constexpr int max_declined_in_a_row = 100, max_declined_in_all = 1000;
// A complete, validated case for strategy s with 1 ≤ p ≤ max_p that s takes, the rest drawn except
// what `pins` fixes (and the partitions s's library picks); a pinned parameter the strategy does
// not have is left out. Declined draws are counted in *tally (when given), which must outlive the
// generator. A kernel that declines nothing draws exactly what it drew before preconditions
// existed: the same seed gives the same cases.
[[nodiscard]] rc::Gen<par::run_case> case_for(const par::kernel& s, int max_p,
                                              const case_pins& pins = {},
                                              draw_tally* tally = nullptr);

}  // namespace shardcheck::prop
