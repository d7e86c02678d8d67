#include "shardcheck/properties/mutants.hpp"

#include "strategies/column_parallel.hpp"
#include "strategies/data_parallel.hpp"
#include "strategies/redistribute_layer.hpp"
#include "strategies/row_parallel.hpp"
#include "strategies/sharded_weights.hpp"

namespace shardcheck::prop {

namespace {
using dp = par::data_parallel;
struct dp_mutant {
  const char* name;
  dp::defect defect;
  const char* words;
  property expected;
};
constexpr dp_mutant dp_mutants[] = {
    {"mutant.dp_drop_last_shard", dp::defect::drop_last_shard,
     "data parallel: the last rank never computes its rows", property::forward},
    {"mutant.dp_reversed_order", dp::defect::reversed_order,
     "data parallel: Y concatenated in reverse rank order", property::forward},
    {"mutant.dp_no_dw_all_reduce", dp::defect::no_dw_all_reduce,
     "data parallel: dW partial sums never all-reduced", property::backward},
    {"mutant.dp_float_compute", dp::defect::float_compute,
     "data parallel: computes Y in float when asked for double", property::forward},
    {"mutant.dp_copies_w", dp::defect::copies_w,
     "data parallel: an unneeded copy of W (a std::vector) inside forward", property::memory},
    {"mutant.dp_desync", dp::defect::rank0_skips_gather,
     "data parallel: rank 0 alone skips the Y all-gather (ranks disagree on the collectives)",
     property::runs},
    {"mutant.dp_extra_barrier", dp::defect::extra_barrier,
     "data parallel: a barrier in backward that the cost model does not declare", property::ledger},
    {"mutant.dp_order_alternates", dp::defect::order_alternates,
     "data parallel: the dW sum order changes from one call to the next", property::determinism},
    {"mutant.dp_rank_order_sum", dp::defect::rank_order_sum,
     "data parallel: each rank adds the dW partials in its own order (replicas drift)",
     property::replicas},
};

// One defect of another strategy: the strategy's defect enum, as for data parallel above.
template <class Strategy>
struct other_mutant {
  const char* name;
  typename Strategy::defect defect;
  const char* words;
  property expected;
};
using rp = par::row_parallel;
using cp = par::column_parallel;
using sw = par::sharded_weights;
constexpr other_mutant<rp> rp_mutants[] = {
    {"mutant.rp_no_all_reduce", rp::defect::no_reduction,
     "row parallel: the partial sums of Y are never reduced across ranks", property::forward},
};
constexpr other_mutant<cp> cp_mutants[] = {
    {"mutant.cp_reversed_order", cp::defect::reversed_order,
     "column parallel: Y column blocks concatenated in reverse rank order", property::forward},
};
using rd = par::redistribute_layer;
constexpr other_mutant<rd> rd_mutants[] = {
    {"mutant.rd_all_to_all_rows_reversed", rd::defect::rows_reversed_in_all_to_all,
     "redistribute: S(1) → S(0) re-lays each received block with its rows reversed",
     property::forward},
};
constexpr other_mutant<sw> sw_mutants[] = {
    {"mutant.sw_ignores_bucket", sw::defect::ignores_bucket,
     "sharded weights: forward ignores the bucket size and gathers all of W at once",
     property::memory},
    {"mutant.sw_reuses_buffer", sw::defect::reuses_buffer,
     "sharded weights: bucket i+1 is gathered into bucket i's buffer before its GEMM ran",
     property::forward},
    {"mutant.sw_padded_buckets", sw::defect::padded_buckets,
     "sharded weights: buffers padded to a full bucket (within its bound, but a smaller bucket "
     "size raises the peak)",
     property::memory},
};
}  // namespace

par::registry mutant_strategies() {
  par::registry r;
  for (const auto& m : dp_mutants) r.add(std::make_unique<dp>(m.defect, m.name));
  for (const auto& m : rp_mutants) r.add(std::make_unique<rp>(m.defect, m.name));
  for (const auto& m : cp_mutants) r.add(std::make_unique<cp>(m.defect, m.name));
  for (const auto& m : rd_mutants) r.add(std::make_unique<rd>(m.defect, m.name));
  for (const auto& m : sw_mutants) r.add(std::make_unique<sw>(m.defect, m.name));
  // Not in the catalogue: it hangs by design (rank 0 waits for a message nobody sends), so the
  // watchdog test uses it alone.
  r.add(std::make_unique<dp>(dp::defect::rank0_waits_forever, "mutant.dp_hang"));
  return r;
}

std::vector<mutant_info> mutant_catalogue() {
  std::vector<mutant_info> out;
  for (const auto& m : dp_mutants) out.push_back({m.name, m.words, m.expected});
  for (const auto& m : rp_mutants) out.push_back({m.name, m.words, m.expected});
  for (const auto& m : cp_mutants) out.push_back({m.name, m.words, m.expected});
  for (const auto& m : rd_mutants) out.push_back({m.name, m.words, m.expected});
  for (const auto& m : sw_mutants) out.push_back({m.name, m.words, m.expected});
  return out;
}

}  // namespace shardcheck::prop
