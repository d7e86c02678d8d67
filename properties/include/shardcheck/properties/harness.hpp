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
#include "shardcheck/properties/verdict.hpp"
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
  // The same global case run under another setting the kernel claims (kernel_info::invariant:
  // another p, partition, backend or parameter value) gives the same bits in every output.
  invariance = 1u << 7,
};
inline constexpr unsigned all_properties = 0xff;
inline constexpr property checked_properties[] = {
    property::forward,     property::backward, property::ledger,    property::memory,
    property::determinism, property::replicas, property::invariance};
// Properties few kernels claim: a report's `not claimed` line leaves them out unless asked for
// by name (--property); JSON and JUnit still say `not claimed`.
inline constexpr unsigned opt_in_properties = static_cast<unsigned>(property::invariance);
// The not-claimed properties a report's `not claimed` line names: the opt-in ones only when
// `mask` (what the run checks) names them, i.e. is not every property.
[[nodiscard]] constexpr unsigned shown_not_claimed(unsigned not_claimed, unsigned mask) {
  return mask == all_properties ? not_claimed & ~opt_in_properties : not_claimed;
}
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
// every layer's dW together) × value mode: each cell the worst over its blocks (verdict.hpp).
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
  // Blocks judged by projection (verdict.hpp project_block): the worst share of its rigorous and
  // statistical bounds used over their projected rows; −1: none projected (or that tier off).
  double projected[2] = {-1, -1};
  double worst_memory = 0;                       // max measured / bound over phases
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

// The inputs a rank holds in case c at mesh coordinates `coords`: its blocks of X, W_1 … W_L and
// dY, generated from the case's seed (benchmarks build their inputs the same way).
struct rank_inputs {
  par::any_matrix x;
  std::vector<par::any_matrix> ws;
  par::any_matrix dy;
};
[[nodiscard]] rank_inputs inputs_of(const par::case_plan& plan, const par::run_case& c);

// What the first run of a case left on this rank, for comparing its outputs with another run's
// (invariance.hpp): each output's block and bits, and whether this rank counts the block (the
// lowest rank holding it, so that replicas count once). Empty where the case did not run.
struct kept_outputs {
  std::vector<par::tensor_slot> slots;
  std::vector<par::block> blocks;
  std::vector<par::any_matrix> values;
  std::vector<bool> counted;
};

// Runs case c on this rank of case_comm (whose size is c.p), checking the properties in `mask`;
// with `keep`, leaves the outputs there. \note collective over case_comm.
[[nodiscard]] verdict run_on_rank(const subject& s, const par::run_case& c, par::comm& case_comm,
                                  unsigned mask, kept_outputs* keep = nullptr);

// Runs forward and backward of case c once on this rank of case_comm and returns what this rank
// recorded, in order (the mesh's collectives and the kernel's raw MPI calls, phase by phase),
// judging nothing: `explain --record` shows it for a kernel whose collectives are not claimed.
// \note collective over case_comm.
[[nodiscard]] std::vector<par::ledger_entry> recorded_ledger(const subject& s,
                                                             const par::run_case& c,
                                                             par::comm& case_comm);

}  // namespace shardcheck::prop
