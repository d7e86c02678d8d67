#pragma once
// Mutants: deliberately broken runs of the registered strategies, each of which some property
// must catch, which proves that property can fail. They live here, outside the code under test:
// nothing under parallel/ knows about them. Three kinds, each a cell of the selftest's matrix:
//
//   fault operators  a collectives layer wrapped around every comm of a case's mesh (the
//                    harness installs it through subject::wrap, above or below the checking
//                    layer), breaking one collective the same way for every strategy:
//                    ag_drop_last ag_ring_short ag_reversed            all-gather
//                    ar_skipped ar_scatter_only ar_order_alternates
//                    ar_rank_order                                     all-reduce
//                    rs_even_offsets                                   reduce-scatter
//                    bcast_wrong_root                                  broadcast
//                    a2a_reversed                                      all-to-all
//                    rank0_skips extra_barrier (above the checker)     any collective
//                    started_early                                     started AG, RS, AR
//                    p2p_lagged                                        point-to-point sends
//   kernel decorators a kernel wrapping a registered one (its info under the mutant's name):
//                    float_inputs (f64 cases only), copies_w, last_w_rows_reversed
//   algorithm mutants a defect inside one strategy's algorithm (one host each), made from
//                    outside it by a decorator of the strategy and, for some, a layer on its
//                    comms that shares the decorator's state:
//                    ignores_bucket reuses_buffer padded_buckets (sharded_weights),
//                    w_panel_wrong_row (summa), keeps_activations (pipeline_1f1b),
//                    dw_over_world (hybrid_mesh)
//
// Naming: the cell of operator `op` on strategy `s` is `mutant.op@s` — the name a case line's
// `strategy=` carries, so a failing case replays with `verify --replay`. find(name) resolves
// every cell, applicable or not, and the mutants never in the matrix: the hang mutant
// `mutant.unanswered@data_parallel` (rank 0 waits for a message nobody sends; the watchdog's
// test), `mutant.empty_shard@data_parallel` (Y's first element one too large whenever some
// rank holds no rows of X; the final shrinking pass's test),
// `mutant.default_claims@data_parallel` (claims the default algorithms' collectives when the case
// chose the tree all-reduce; the ledger's test of the tree) and
// `mutant.last_k_dropped@data_parallel` and `@row_parallel` (each rank's last term of its local
// contraction dropped in forward: the large-K test of the statistical and projection tiers).
//
// Applicability (the matrix's `-`) is decided from the claims: a fault operator applies to a
// strategy whose cost() lists the collective it targets, on a comm of ≥ 2 ranks (≥ 3 for the
// summation-order faults, which need three addends to change bits), in any of 24 cases drawn by
// the generators with up to max_p workers; point-to-point faults need a send in the claims; a
// strategy that claims no collectives gets every operator. Claims do not tell started from
// blocking collectives, so started_early applies wherever a gather or a reduction is listed. A
// decorator applies to every strategy (float_inputs: those that support f64), an algorithm
// mutant to its host. Whether a fault really acted is recorded by the layer itself (fire_count():
// how often it changed something in this process, which for the selftest's leader means as rank 0
// of the case): an applicable cell that never acted is reported as never acted (`~`), not as
// caught.
//
// The 27 catalogued mutants of the tree before the redesign (28 names with dp_hang) and their
// cells, with the property that must catch each (the selftest fails unless each does):
//
//   old mutant                   cell                                           property
//   dp_drop_last_shard           mutant.ag_drop_last@data_parallel              forward
//   dp_reversed_order            mutant.ag_reversed@data_parallel               forward
//   dp_no_dw_all_reduce          mutant.ar_skipped@data_parallel                backward
//   dp_float_compute             mutant.float_inputs@data_parallel              forward
//   dp_copies_w                  mutant.copies_w@data_parallel                  memory
//   dp_desync                    mutant.rank0_skips@data_parallel               runs
//   dp_extra_barrier             mutant.extra_barrier@data_parallel             ledger
//   dp_order_alternates          mutant.ar_order_alternates@data_parallel       determinism
//   dp_rank_order_sum            mutant.ar_rank_order@data_parallel             replicas
//   rp_no_all_reduce             mutant.ar_skipped@row_parallel                 forward
//   cp_reversed_order            mutant.ag_reversed@column_parallel             forward
//   summa_wrong_row_panel        mutant.w_panel_wrong_row@summa                 forward
//   rd_all_to_all_rows_reversed  mutant.a2a_reversed@redistribute               forward
//   sw_ignores_bucket            mutant.ignores_bucket@sharded_weights          memory
//   sw_reuses_buffer             mutant.reuses_buffer@sharded_weights           forward
//   sw_padded_buckets            mutant.padded_buckets@sharded_weights          memory
//   crp_wrong_w2_shard           mutant.last_w_rows_reversed@column_row_pair    forward
//   spp_scatter_wrong_partition  mutant.rs_even_offsets@sequence_parallel_pair  forward
//   pp_micro_batch_shifted       mutant.p2p_lagged@pipeline_gpipe               forward
//   pp_keeps_activations         mutant.keeps_activations@pipeline_1f1b         memory
//   hybrid_dw_over_world         mutant.dw_over_world@hybrid_mesh               backward
//   ring_short_by_one            mutant.ag_ring_short@data_parallel             forward
//   broadcast_wrong_root         mutant.bcast_wrong_root@collective.broadcast   forward
//   all_reduce_no_gather         mutant.ar_scatter_only@row_parallel            forward
//   reduce_scatter_even          mutant.rs_even_offsets@row_parallel            forward
//   nonblocking_short_by_one     mutant.started_early@collective.overlap        forward
//   nonblocking_dw_short_by_one  mutant.started_early@collective.overlap        backward
//   dp_hang (not one of them)    mutant.unanswered@data_parallel                (hangs)
//
// The old collective defects lived in the native schedules only (cases with backend=native);
// the operators act on both backends.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "shardcheck/parallel/registry.hpp"
#include "shardcheck/properties/harness.hpp"

namespace shardcheck::prop {

namespace mutants {
struct fire_log;
}

// One operator (a row of the matrix).
struct mutant_operator {
  std::string name;
  std::string what;     // the defect, in words
  std::string targets;  // what it acts on: "all_gather", "any collective", "kernel", …
};

// One cell: an operator on one strategy.
struct mutant_cell {
  std::string name;      // mutant.<operator>@<strategy>
  std::string op;        // the operator's name
  std::string strategy;  // the registered strategy it runs
  bool applies = false;  // see "Applicability" above
  subject s;
  std::shared_ptr<const mutants::fire_log> log;
  // Replay lines the selftest runs on the cell besides its generated cases (strategy= is the
  // cell's name): sizes the generators do not draw, e.g. K = 16384 for a defect of long sums.
  std::vector<std::string> targeted{};
  // How often the fault acted in this process so far.
  [[nodiscard]] std::int64_t fire_count() const;
};

// An old mutant and its cell.
struct old_mutant {
  std::string_view old_name;
  std::string_view cell;
  property expected;
};
[[nodiscard]] std::span<const old_mutant> old_mutants();

// Every cell of every operator on every registered strategy, owning the decorated kernels.
// Build it on every rank alike (followers find cells by name when a case arrives).
class mutant_set {
 public:
  // On par::builtin_strategies() and the collective checks (checks.hpp), owned. max_p: the most
  // workers a case can have (the launched ranks); it decides applicability only.
  explicit mutant_set(int max_p = 4);
  // On the caller's registries, in order, which must outlive the set.
  explicit mutant_set(const par::registry& strategies, int max_p = 4);
  explicit mutant_set(const std::vector<const par::registry*>& strategies, int max_p = 4);
  ~mutant_set();
  mutant_set(const mutant_set&) = delete;
  mutant_set& operator=(const mutant_set&) = delete;

  // The subject of a cell (or of the hang mutant) by name; nullptr if no mutant has that name.
  // An old mutant's name (mutant.dp_drop_last_shard, …, mutant.dp_hang) finds its cell.
  [[nodiscard]] const subject* find(std::string_view name) const;
  [[nodiscard]] const mutant_cell* cell(std::string_view name) const;
  [[nodiscard]] const mutant_cell* cell(std::string_view op, std::string_view strategy) const;
  // Rows and columns of the matrix, in order.
  [[nodiscard]] const std::vector<mutant_operator>& operators() const;
  [[nodiscard]] const std::vector<std::string>& strategies() const;
  [[nodiscard]] const std::vector<mutant_cell>& cells() const;

 private:
  void build(const std::vector<const par::registry*>& strategies, int max_p);
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace shardcheck::prop
