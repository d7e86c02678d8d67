#include "shardcheck/properties/mutants.hpp"

#include "strategies/collective_check.hpp"
#include "strategies/column_parallel.hpp"
#include "strategies/column_row_pair.hpp"
#include "strategies/data_parallel.hpp"
#include "strategies/overlap_check.hpp"
#include "strategies/pipeline.hpp"
#include "strategies/redistribute_layer.hpp"
#include "strategies/row_parallel.hpp"
#include "strategies/sequence_parallel_pair.hpp"
#include "strategies/sharded_weights.hpp"
#include "strategies/summa.hpp"

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
using su = par::summa;
constexpr other_mutant<su> su_mutants[] = {
    {"mutant.summa_wrong_row_panel", su::defect::w_panel_wrong_row,
     "SUMMA: each W panel is broadcast from the next mesh row (its own rows, not the panel's)",
     property::forward},
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
using crp = par::column_row_pair;
constexpr other_mutant<crp> crp_mutants[] = {
    {"mutant.crp_wrong_w2_shard", crp::defect::wrong_w2_shard,
     "column → row pair: forward pairs its hidden units with its W2 shard in reverse (the wrong "
     "slice of W2)",
     property::forward},
};
using spp = par::sequence_parallel_pair;
constexpr other_mutant<spp> spp_mutants[] = {
    {"mutant.spp_scatter_wrong_partition", spp::defect::scatter_wrong_partition,
     "sequence-parallel pair: forward reduce-scatters Y by a balanced partition, not part.M",
     property::forward},
};
using pp = par::pipeline;
struct pipeline_mutant {
  const char* name;
  pp::defect defect;
  par::pipeline_schedule schedule;
  bool hybrid;
  const char* words;
  property expected;
};
constexpr pipeline_mutant pipeline_mutants[] = {
    {"mutant.pp_micro_batch_shifted", pp::defect::micro_batch_shifted,
     par::pipeline_schedule::gpipe, false,
     "pipeline (GPipe): a stage sends micro-batch i's activations on as micro-batch i + 1's",
     property::forward},
    {"mutant.pp_keeps_activations", pp::defect::keeps_activations,
     par::pipeline_schedule::one_f_one_b, false,
     "pipeline (1F1B): activations are freed only when the step ends (GPipe's memory)",
     property::memory},
    {"mutant.hybrid_dw_over_world", pp::defect::dw_over_world, par::pipeline_schedule::one_f_one_b,
     true, "hybrid mesh: dW all-reduced over the whole mesh instead of the dp axis",
     property::backward},
};

// A strategy run with a defect in the native collectives of its mesh. Only cases drawn with
// backend=native meet the defect; the generators draw both backends, so some of them do.
class with_collective_defect final : public par::strategy {
 public:
  with_collective_defect(std::unique_ptr<par::strategy> inner, par::collective_defect d)
      : inner_(std::move(inner)), defect_(d) {}
  [[nodiscard]] std::string name() const override { return inner_->name(); }
  [[nodiscard]] std::string summary() const override { return inner_->summary(); }
  [[nodiscard]] std::vector<par::param_spec> params() const override { return inner_->params(); }
  [[nodiscard]] std::vector<int> mesh_dims(const par::run_case& c) const override {
    return inner_->mesh_dims(c);
  }
  [[nodiscard]] par::layout placement_of(par::tensor t, const par::run_case& c) const override {
    return inner_->placement_of(t, c);
  }
  [[nodiscard]] par::cost_estimate cost(const par::run_case& c,
                                        std::span<const int> coords) const override {
    return inner_->cost(c, coords);
  }
  void forward(par::context& ctx, const par::run_case& c, const par::any_matrix& x,
               const par::any_matrix& w, par::any_matrix& y) const override {
    ctx.grid.set_defect(defect_);
    inner_->forward(ctx, c, x, w, y);
  }
  void backward(par::context& ctx, const par::run_case& c, const par::any_matrix& x,
                const par::any_matrix& w, const par::any_matrix& dy, par::any_matrix& dx,
                par::any_matrix& dw) const override {
    ctx.grid.set_defect(defect_);
    inner_->backward(ctx, c, x, w, dy, dx, dw);
  }

 private:
  std::unique_ptr<par::strategy> inner_;
  par::collective_defect defect_;
};

using cd = par::collective_defect;
struct collective_mutant {
  const char* name;
  cd defect;
  const char* host;  // the strategy run with the defect
  const char* words;
  property expected;
};
constexpr collective_mutant collective_mutants[] = {
    {"mutant.ring_short_by_one", cd::ring_short_by_one, "data_parallel",
     "native ring all-gather: one step short, so one chunk never arrives", property::forward},
    {"mutant.broadcast_wrong_root", cd::broadcast_root_zero, "collective.broadcast",
     "native broadcast: always from rank 0, whatever the root", property::forward},
    {"mutant.all_reduce_no_gather", cd::all_reduce_no_gather, "row_parallel",
     "native ring all-reduce: stops after its reduce-scatter phase", property::forward},
    {"mutant.reduce_scatter_even", cd::reduce_scatter_even_counts, "row_parallel",
     "native reduce-scatter-v: reads chunks where an even split would put them", property::forward},
    {"mutant.nonblocking_short_by_one", cd::nonblocking_short_by_one, "collective.overlap",
     "native non-blocking ring all-gather of Y: a started collective ends one step early",
     property::forward},
    {"mutant.nonblocking_dw_short_by_one", cd::nonblocking_short_by_one, "collective.overlap",
     "native non-blocking ring reduce-scatter / all-reduce of dW: one step early",
     property::backward},
};

std::unique_ptr<par::strategy> host_named(std::string_view host, const char* name) {
  if (host == "data_parallel") return std::make_unique<dp>(dp::defect::none, name);
  if (host == "row_parallel") return std::make_unique<rp>(rp::defect::none, name);
  if (host == "collective.overlap") return std::make_unique<par::overlap_check>(name);
  return std::make_unique<par::collective_check>(par::collective::broadcast, name);
}
}  // namespace

par::registry mutant_strategies() {
  par::registry r;
  for (const auto& m : dp_mutants) r.add(std::make_unique<dp>(m.defect, m.name));
  for (const auto& m : rp_mutants) r.add(std::make_unique<rp>(m.defect, m.name));
  for (const auto& m : cp_mutants) r.add(std::make_unique<cp>(m.defect, m.name));
  for (const auto& m : rd_mutants) r.add(std::make_unique<rd>(m.defect, m.name));
  for (const auto& m : sw_mutants) r.add(std::make_unique<sw>(m.defect, m.name));
  for (const auto& m : crp_mutants) r.add(std::make_unique<crp>(m.defect, m.name));
  for (const auto& m : spp_mutants) r.add(std::make_unique<spp>(m.defect, m.name));
  for (const auto& m : su_mutants) r.add(std::make_unique<su>(m.defect, m.name));
  for (const auto& m : pipeline_mutants)
    r.add(std::make_unique<pp>(m.schedule, m.hybrid, m.defect, m.name));
  for (const auto& m : collective_mutants)
    r.add(std::make_unique<with_collective_defect>(host_named(m.host, m.name), m.defect));
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
  for (const auto& m : crp_mutants) out.push_back({m.name, m.words, m.expected});
  for (const auto& m : spp_mutants) out.push_back({m.name, m.words, m.expected});
  for (const auto& m : su_mutants) out.push_back({m.name, m.words, m.expected});
  for (const auto& m : pipeline_mutants) out.push_back({m.name, m.words, m.expected});
  for (const auto& m : collective_mutants) out.push_back({m.name, m.words, m.expected});
  return out;
}

}  // namespace shardcheck::prop
