#pragma once
// Runs one case on one rank and judges it: the rank generates its own shards, runs the strategy,
// and checks its own output blocks against a reference computed locally from the rows and columns
// it needs. Nothing is gathered to rank 0 to check.
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "shardcheck/parallel/comm.hpp"
#include "shardcheck/parallel/kernel.hpp"
#include "shardcheck/parallel/plan.hpp"
#include "shardcheck/parallel/pmpi.hpp"
#include "shardcheck/reference/stack.hpp"

namespace shardcheck::prop {

// The properties every strategy is held to. `runs` is implicit: the case ran without an error.
enum class property : unsigned {
  runs = 1u << 0,
  forward = 1u << 1,      // Y equals the reference (bitwise in exact mode, else within the bound)
  backward = 1u << 2,     // dX and dW equal the reference
  ledger = 1u << 3,       // the recorded collectives equal the cost model's, entry for entry
  memory = 1u << 4,       // measured peak bytes ≤ the cost model's bound, per phase
  determinism = 1u << 5,  // a second run gives the same bits
  replicas = 1u << 6,     // ranks holding the same block of an output hold the same bits
};
inline constexpr unsigned all_properties = 0x7f;
inline constexpr property checked_properties[] = {property::forward,     property::backward,
                                                  property::ledger,      property::memory,
                                                  property::determinism, property::replicas};
[[nodiscard]] std::string_view to_string(property p);
// Comma-separated names, or "all"; throws invalid_problem.
[[nodiscard]] unsigned parse_properties(std::string_view s);
[[nodiscard]] std::string properties_to_string(unsigned mask);

// What a case runs: a kernel and, for a mutant, the layers the harness wraps around every comm of
// the case's mesh (a fault injector: properties/, mutants). The wrapper is called afresh for each
// mesh, so a layer's state lasts one case. `raw`, for a fault operator, builds the interceptor of
// the case's recording window (pmpi.hpp) from the mesh's communicators, once per case: the same
// fault on the kernel's own MPI calls.
struct subject {
  const par::kernel* k = nullptr;
  par::layer_wrapper wrap;
  std::function<std::unique_ptr<par::pmpi::interceptor>(std::span<const MPI_Comm>)> raw{};
};

// A property's outcome on a case: `not_claimed` when the kernel makes no claim it could be judged
// against (e.g. no peak bytes for `memory`), which is never a pass.
enum class outcome { pass, fail, not_claimed };

// The numbers behind the forward and backward verdicts of one dtype × output tensor (Y, dX, and
// every layer's dW together) × value mode: the worst |got − expected| / (u·mag) over its finite
// elements (mag = |X||W|ᵀ, a stack's through its layers), and the worst share of each tier's
// bound used (|got − expected| / bound; 1 is at the bound). −1: nothing judged there; the tiers
// stay −1 in exact mode, which is bitwise. bf16 and f16 (a window, mixed.hpp): expected is the
// reference's unrounded f32 value b and u the storage dtype's, so a correct kernel's round(b)
// reads up to about 1; a tier's share is ref::window_share's (> 1: outside that window).
struct error_cell {
  double err_u_mag = -1, rigorous = -1, statistical = -1;
};
struct error_figures {
  static constexpr std::size_t dtypes = dtype_count;  // every dtype of types.hpp
  static constexpr std::size_t tensors = 3, modes = value_mode_count;
  static constexpr std::size_t size = dtypes * tensors * modes;
  std::array<error_cell, size> cells{};
  // tensor: y, dx or dw.
  [[nodiscard]] static std::size_t index(dtype t, par::tensor out, value_mode m);
  [[nodiscard]] error_cell& at(dtype t, par::tensor out, value_mode m) {
    return cells.at(index(t, out, m));
  }
  void merge(const error_figures& o);  // the larger of each figure
  // Over every mode: the cell of dtype t and tensor out.
  [[nodiscard]] error_cell over_modes(dtype t, par::tensor out) const;
  [[nodiscard]] double worst_u_mag() const;
};

struct verdict {
  unsigned failed = 0;       // properties that failed on this rank
  unsigned not_claimed = 0;  // properties the kernel made no claim for (never counted as a pass)
  std::string message;       // the first failure, fully described
  double worst_error = 0;    // max |got − expected| / (u·mag) over this rank's finite outputs
  error_figures errors;      // the same per dtype, tensor and mode, with each tier's share
  double worst_memory = 0;   // max measured / bound over phases
  std::int64_t peak_bytes = 0, bound_bytes = 0;  // of the phase with the worst ratio
  // What MPI itself allocated inside the kernel's MPI calls (the peak of its live bytes over
  // forward and backward): counted apart, never in peak_bytes (memory.hpp's mpi_heap).
  std::int64_t mpi_peak_bytes = 0;
  // Properties the program cannot measure (never counted as a pass): `memory` when it does not
  // link shardcheck::new_hook, so plain new — a std::vector copy of W — goes uncounted.
  unsigned not_measured = 0;
  // Bytes this rank sent in the case's first run, forward and backward, as recorded (its comm
  // and, with shardcheck::pmpi, its raw MPI calls): what a kernel that claims no collectives
  // really moved.
  std::int64_t recorded_sent = 0;
  // The verification work of this rank's output blocks (forward, backward), as the weak-scaling
  // report reads it: the meter's peak while they were checked (reference blocks, magnitudes, the
  // input panels generated), the panels' bytes and the flops of the references and magnitudes
  // (2 per multiply-add). Ranks holding the same block share its inner dimension: data_parallel's
  // dW (N × K, on all p ranks) costs each rank the products over its own M/p rows, then a sum.
  std::int64_t check_peak_bytes = 0, check_panel_bytes = 0, check_flops = 0;
  double check_seconds = 0;
};

// The statistical tier's rounding events of case c (bound.hpp lambda_for): Σ over every judged
// product's elements of max(k_par, n) + n for a contraction of n terms — a union bound over
// every term of both computations' dot products (Higham & Mary's Theorem 3.1 fails with
// probability n·2·exp(−λ²(1 − u)²/2) for n terms, each within γ̃_k(λ) for its k ≤ chain rounding
// factors; a chain k_par shorter than n, as row-parallel's K/p + depth, still has n terms). A
// single layer's Y (forward) and dX, dW (backward), or every product of each of a stack's layers.
// One layer of 64×64×4096, both phases: 64·64·8192 + 64·4096·128 + 64·4096·128 = 1.0e8 events,
// λ = 8.93 at p_fail = 1e-9.
[[nodiscard]] double statistical_events(const par::run_case& c,
                                        std::span<const par::chain_lengths> chains, bool forward,
                                        bool backward);

// The windows output t of a bf16 / f16 single layer is judged by (reference/mixed.hpp): got within
// [round(b − δ), round(b + δ)] of the reference's f32 value b, δ = factor·mag. `rigorous` is
// f_par + γ_K(u_f32) for the kernel's chain k_par (of which k_red reduced); `statistical` the
// same with γ̃(λ), λ from the case's rounding events (0 in exact mode, which is bitwise).
struct mixed_windows {
  double rigorous = 0, statistical = 0, lambda = 0, events = 0;
  std::int64_t k_par = 0, k_red = 0;
};
[[nodiscard]] mixed_windows mixed_windows_of(const par::run_case& c,
                                             std::span<const par::chain_lengths> chains,
                                             par::tensor t);

// The statistical tier of a case (bound.hpp): λ from its rounding events, so that a correct
// kernel fails it with probability ≤ ref::statistical_p_fail, and that probability. λ = 0: off.
struct statistical_tier {
  double lambda = 0, p_fail = 0;
};

// A bf16 / f16 stack (L > 1): the tier of its windows, from the rounding events of the phases
// checked and u the larger of the policy's accumulation and reduction dtypes (off in exact mode),
// and its whole reference — every output in f32 on the widened inputs, the hidden tensors stored
// in the storage dtype as a kernel stores them — with each element's window half-width for the
// case's policy and the strategy's chains per layer, and at λ > 0 the statistical tier's
// (reference/stack.hpp). What verify judges a 16-bit stack's blocks by.
[[nodiscard]] statistical_tier mixed_stack_tier(const par::run_case& c,
                                                std::span<const par::chain_lengths> chains,
                                                bool forward, bool backward);
[[nodiscard]] ref::stack_expectation<float> mixed_stack_reference(
    const par::run_case& c, std::span<const par::chain_lengths> chains, double lambda);

// The inputs a rank holds in case c at mesh coordinates `coords`: its blocks of X, W_1 … W_L and
// dY, generated from the case's seed (benchmarks build their inputs the same way).
struct rank_inputs {
  par::any_matrix x;
  std::vector<par::any_matrix> ws;
  par::any_matrix dy;
};
[[nodiscard]] rank_inputs inputs_of(const par::case_plan& plan, const par::run_case& c);

// Runs case c on this rank of case_comm (whose size is c.p), checking the properties in `mask`.
// \note collective over case_comm.
[[nodiscard]] verdict run_on_rank(const subject& s, const par::run_case& c, par::comm& case_comm,
                                  unsigned mask);

// Runs forward and backward of case c once on this rank of case_comm and returns what this rank
// recorded, in order (the mesh's collectives and the kernel's raw MPI calls, phase by phase),
// judging nothing: `explain --record` shows it for a kernel whose collectives are not claimed.
// \note collective over case_comm.
[[nodiscard]] std::vector<par::ledger_entry> recorded_ledger(const subject& s,
                                                             const par::run_case& c,
                                                             par::comm& case_comm);

}  // namespace shardcheck::prop
