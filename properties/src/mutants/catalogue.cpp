// The catalogue: every operator × every registered strategy, as named cells.
#include <algorithm>
#include <array>
#include <functional>
#include <set>
#include <utility>

#include "mutants/faults.hpp"
#include "mutants/kernels.hpp"
#include "mutants/mixed.hpp"
#include "mutants/raw_faults.hpp"
#include "shardcheck/parallel/registry.hpp"
#include "shardcheck/properties/checks.hpp"
#include "shardcheck/properties/generators.hpp"
#include "shardcheck/properties/mutants.hpp"

namespace shardcheck::prop {

std::int64_t mutant_cell::fire_count() const { return log != nullptr ? log->acts : 0; }

namespace {
using mutants::fire_log;
using par::collective;
using par::layer_position;

constexpr std::array<old_mutant, 31> old_table{{
    {"dp_drop_last_shard", "mutant.ag_drop_last@data_parallel", property::forward},
    {"dp_reversed_order", "mutant.ag_reversed@data_parallel", property::forward},
    {"dp_no_dw_all_reduce", "mutant.ar_skipped@data_parallel", property::backward},
    {"dp_float_compute", "mutant.float_inputs@data_parallel", property::forward},
    {"dp_copies_w", "mutant.copies_w@data_parallel", property::memory},
    {"dp_desync", "mutant.rank0_skips@data_parallel", property::runs},
    {"dp_extra_barrier", "mutant.extra_barrier@data_parallel", property::ledger},
    {"dp_order_alternates", "mutant.ar_order_alternates@data_parallel", property::determinism},
    {"dp_rank_order_sum", "mutant.ar_rank_order@data_parallel", property::replicas},
    {"rp_no_all_reduce", "mutant.ar_skipped@row_parallel", property::forward},
    {"cp_reversed_order", "mutant.ag_reversed@column_parallel", property::forward},
    {"summa_wrong_row_panel", "mutant.w_panel_wrong_row@summa", property::forward},
    {"rd_all_to_all_rows_reversed", "mutant.a2a_reversed@redistribute", property::forward},
    {"sw_ignores_bucket", "mutant.ignores_bucket@sharded_weights", property::memory},
    {"sw_reuses_buffer", "mutant.reuses_buffer@sharded_weights", property::forward},
    {"sw_padded_buckets", "mutant.padded_buckets@sharded_weights", property::memory},
    {"crp_wrong_w2_shard", "mutant.last_w_rows_reversed@column_row_pair", property::forward},
    {"spp_scatter_wrong_partition", "mutant.rs_even_offsets@sequence_parallel_pair",
     property::forward},
    {"pp_micro_batch_shifted", "mutant.p2p_lagged@pipeline_gpipe", property::forward},
    {"pp_keeps_activations", "mutant.keeps_activations@pipeline_1f1b", property::memory},
    {"hybrid_dw_over_world", "mutant.dw_over_world@hybrid_mesh", property::backward},
    {"ring_short_by_one", "mutant.ag_ring_short@data_parallel", property::forward},
    {"broadcast_wrong_root", "mutant.bcast_wrong_root@collective.broadcast", property::forward},
    {"all_reduce_no_gather", "mutant.ar_scatter_only@row_parallel", property::forward},
    {"reduce_scatter_even", "mutant.rs_even_offsets@row_parallel", property::forward},
    {"nonblocking_short_by_one", "mutant.started_early@collective.overlap", property::forward},
    {"nonblocking_dw_short_by_one", "mutant.started_early@collective.overlap", property::backward},
    {"rp_partials_in_bf16", "mutant.partials_in_storage@row_parallel", property::forward},
    {"rp_acc_in_bf16", "mutant.acc_in_storage@row_parallel", property::forward},
    {"rp_reduces_in_bf16", "mutant.reduce_in_bf16@row_parallel", property::forward},
    {"cp_skips_zeros", "mutant.skips_zeros@column_parallel", property::forward},
}};

// What a strategy's claims list, over the sampled cases.
struct usage {
  bool claimed = false;        // some case claimed its collectives
  std::set<collective> kinds;  // collectives on a comm of ≥ 2 ranks, with elements
  int widest_reduce = 0;       // the most ranks an all-reduce ran on
  bool any_collective = false, any_shared = false, sends = false;
};

usage usage_of(const par::kernel& k, int max_p) {
  usage u;
  constexpr int samples = 24;
  for (int i = 0; i < samples; ++i) {
    try {
      const par::run_case c = case_for(k, max_p)(rc::Random(7919u * (i + 1)), 5 + 4 * i).value();
      const std::vector<int> dims = k.mesh_dims(c);
      for (int r = 0; r < c.p; ++r) {
        const par::claims cl = k.cost(c, par::coords_of(r, dims));
        if (!cl.collectives) continue;
        u.claimed = true;
        for (const auto* list : {&cl.collectives->forward, &cl.collectives->backward})
          for (const par::ledger_entry& e : *list) {
            if (e.kind == collective::send || e.kind == collective::recv) {
              u.sends = true;
              continue;
            }
            u.any_collective = true;
            const int ranks = e.axis < 0 ? c.p : dims.at(static_cast<std::size_t>(e.axis));
            if (ranks < 2) continue;
            u.any_shared = true;
            if (e.elements > 0 || e.kind == collective::barrier) u.kinds.insert(e.kind);
            if (e.kind == collective::all_reduce && e.elements > 0)
              u.widest_reduce = std::max(u.widest_reduce, ranks);
          }
      }
    } catch (const std::exception&) {
      // a drawn case the kernel rejects says nothing about its collectives
    }
  }
  return u;
}

using layer_maker = std::function<std::unique_ptr<par::collectives>(
    std::unique_ptr<par::collectives>, std::shared_ptr<fire_log>)>;

template <class Layer>
layer_maker maker() {
  return [](std::unique_ptr<par::collectives> inner, std::shared_ptr<fire_log> log) {
    return std::make_unique<Layer>(std::move(inner), std::move(log));
  };
}

struct fault_op {
  mutant_operator info;
  layer_position where;
  layer_maker make;
  std::function<bool(const usage&)> applies;
};

bool has(const usage& u, collective k) { return !u.claimed || u.kinds.count(k) != 0; }

std::vector<fault_op> fault_ops() {
  const auto kind = [](collective k) { return [k](const usage& u) { return has(u, k); }; };
  const auto below = layer_position::below, above = layer_position::above;
  return {
      {{"ag_drop_last",
        "all-gather: the last rank's part never arrives (receivers keep what "
        "they held there)",
        "all_gather"},
       below,
       maker<mutants::ag_drop_last>(),
       kind(collective::all_gather)},
      {{"ag_ring_short",
        "all-gather: a ring one step short, rank r never receives rank r+1's "
        "part",
        "all_gather"},
       below,
       maker<mutants::ag_ring_short>(),
       kind(collective::all_gather)},
      {{"ag_reversed", "all-gather: the parts laid out in reverse rank order", "all_gather"},
       below,
       maker<mutants::ag_reversed>(),
       kind(collective::all_gather)},
      {{"ar_skipped", "all-reduce: never reduced, each rank keeps its own partial", "all_reduce"},
       below,
       maker<mutants::ar_skipped>(),
       kind(collective::all_reduce)},
      {{"ar_scatter_only",
        "all-reduce: stops after its reduce-scatter half (each rank holds "
        "the sum in its balanced chunk only)",
        "all_reduce"},
       below,
       maker<mutants::ar_scatter_only>(),
       kind(collective::all_reduce)},
      {{"ar_order_alternates",
        "all-reduce: summed in another order after a comm's first call, "
        "the same on every rank (a determinism defect)",
        "all_reduce"},
       below,
       maker<mutants::ar_order_alternates>(),
       [](const usage& u) { return !u.claimed || u.widest_reduce >= 3; }},
      {{"ar_rank_order", "all-reduce: each rank sums starting from itself (replicas drift)",
        "all_reduce"},
       below,
       maker<mutants::ar_rank_order>(),
       [](const usage& u) { return !u.claimed || u.widest_reduce >= 3; }},
      {{"rs_even_offsets", "reduce-scatter: parts read where an even split would put them",
        "reduce_scatter"},
       below,
       maker<mutants::rs_even_offsets>(),
       kind(collective::reduce_scatter)},
      {{"reduce_in_bf16",
        "all-reduce, reduce-scatter: f32 partial sums rounded to bfloat16 before the "
        "reduction",
        "all_reduce, reduce_scatter"},
       below,
       maker<mutants::reduce_in_bf16>(),
       [](const usage& u) {
         return has(u, collective::all_reduce) || has(u, collective::reduce_scatter);
       }},
      {{"bcast_wrong_root", "broadcast: from root+1 mod p", "broadcast"},
       below,
       maker<mutants::bcast_wrong_root>(),
       kind(collective::broadcast)},
      {{"a2a_reversed", "all-to-all: received blocks laid out in reverse sender order",
        "all_to_all"},
       below,
       maker<mutants::a2a_reversed>(),
       kind(collective::all_to_all)},
      {{"rank0_skips",
        "rank 0 skips its first collective on a comm (a barrier in its place): "
        "the ranks disagree",
        "any collective"},
       above,
       maker<mutants::rank0_skips>(),
       [](const usage& u) { return !u.claimed || u.any_shared; }},
      {{"last_rank_stops",
        "the last rank makes no collective after its first on a comm, as a kernel returning "
        "early: the others wait in a call it never makes (ranks out of step)",
        "any collective"},
       above,
       maker<mutants::last_rank_stops>(),
       // Not where ranks also wait on messages (a receive is not watched: a hang, not `runs`).
       [](const usage& u) { return u.claimed && u.any_shared && !u.sends; }},
      {{"extra_barrier", "a barrier before a comm's first collective that no claim states",
        "any collective"},
       above,
       maker<mutants::extra_barrier>(),
       [](const usage& u) { return !u.claimed || u.any_collective; }},
      {{"started_early",
        "started collectives end early: an all-gather without rank r+1's "
        "part, a reduction skipped",
        "started all_gather, reductions"},
       below,
       maker<mutants::started_early>(),
       [](const usage& u) {
         return has(u, collective::all_gather) || has(u, collective::all_reduce) ||
                has(u, collective::reduce_scatter);
       }},
      {{"p2p_lagged",
        "point-to-point: each send delivers the previous payload of its size to "
        "that peer",
        "send"},
       below,
       maker<mutants::p2p_lagged>(),
       [](const usage& u) { return !u.claimed || u.sends; }},
  };
}

par::layer_wrapper wrap_with(layer_position where, layer_maker make,
                             std::shared_ptr<fire_log> log) {
  return [where, make = std::move(make), log = std::move(log)](
             std::unique_ptr<par::collectives> inner, layer_position at,
             int) -> std::unique_ptr<par::collectives> {
    if (at != where) return inner;
    return make(std::move(inner), log);
  };
}

// The same fault on a kernel's own MPI calls (raw_faults.hpp).
std::function<std::unique_ptr<par::pmpi::interceptor>(std::span<const MPI_Comm>)> raw_with(
    layer_position where, layer_maker make, std::shared_ptr<fire_log> log) {
  return [where, make = std::move(make), log = std::move(log)](std::span<const MPI_Comm> comms) {
    return std::unique_ptr<par::pmpi::interceptor>(
        std::make_unique<mutants::raw_faults>(where, make, log, comms));
  };
}

struct decorator_op {
  mutant_operator info;
  std::function<std::unique_ptr<par::kernel>(const par::kernel&, std::string,
                                             std::shared_ptr<fire_log>)>
      make;
};

template <class K>
auto decorate() {
  return [](const par::kernel& k, std::string name, std::shared_ptr<fire_log> log) {
    return std::unique_ptr<par::kernel>(std::make_unique<K>(k, std::move(name), std::move(log)));
  };
}

// The defects inside one strategy's algorithm (kernels.hpp, make_algorithm_mutant), each on its
// one host.
struct algorithm_op {
  mutant_operator info;
  const char* host;
};

const algorithm_op algorithm_ops[] = {
    {{"ignores_bucket", "sharded weights: forward gathers all of W at once, whatever the bucket",
      "kernel"},
     "sharded_weights"},
    {{"reuses_buffer",
      "sharded weights: bucket i+1 gathered into bucket i's buffer before its "
      "products ran",
      "kernel, started all_gather"},
     "sharded_weights"},
    {{"padded_buckets",
      "sharded weights: buffers padded to a full bucket (a smaller bucket can "
      "raise the peak)",
      "kernel"},
     "sharded_weights"},
    {{"w_panel_wrong_row", "SUMMA: each W panel broadcast from the next mesh row",
      "kernel, broadcast"},
     "summa"},
    {{"keeps_activations", "1F1B: activations kept until the step ends", "kernel"},
     "pipeline_1f1b"},
    {{"skips_zeros",
      "column parallel: the local product skips zero activations (0·Inf never reaches Y)",
      "kernel"},
     "column_parallel"},
    {{"dw_over_world", "hybrid mesh: dW all-reduced over the whole mesh, not the dp axis",
      "all_reduce"},
     "hybrid_mesh"},
};

// Mixed-precision decorators (mutants/mixed.hpp), each on its hosts, with the targeted cases on 2
// ranks that the selftest runs beside the generated ones.
struct mixed_host {
  const char* host;
  std::function<std::unique_ptr<par::kernel>(const par::kernel&, std::string,
                                             std::shared_ptr<fire_log>)>
      make;
  std::vector<std::string> targeted;  // replay lines without strategy=
};
struct mixed_op {
  mutant_operator info;
  std::vector<mixed_host> hosts;
};

std::vector<mixed_op> mixed_ops() {
  // p = 2, Y all-reduced (scatter=0); the mutants declare acc=f32 reduce=f32.
  const auto at = [](const char* size, const char* dtype_mode) {
    return std::string("p=2 M=16 N=16 ") + size + " layout=out_in seed=3 backend=native " +
           dtype_mode + " acc=f32 reduce=f32 scatter=0";
  };
  // The pairs and sharded_weights on 2 ranks, bf16 and f16, reduce=f32 declared.
  const auto on = [](const char* shape, const char* dtype) {
    return std::string("p=2 ") + shape +
           " layout=out_in mode=uniform seed=3 backend=native dtype=" + dtype +
           " acc=f32 reduce=f32";
  };
  const char* pair = "M=16 N=16 K=64 H=64 act=relu";
  const char* dw = "M=1024 N=8 K=8 bucket=64 overlap=1";
  // At a contraction of 16384 (the pairs' H, sharded_weights' M for dW), on positive data: on
  // mean-zero data there the window is wider than the defect (docs/numerics.md, "What the mixed
  // mutants show").
  const auto long_chain = [](const char* shape) {
    return std::string("p=2 ") + shape +
           " layout=out_in mode=positive seed=3 backend=native dtype=bf16 acc=f32 reduce=f32";
  };
  const char* pair_long = "M=16 N=16 K=64 H=16384 act=relu";
  const char* dw_long = "M=16384 N=8 K=8 bucket=64 overlap=1";
  return {
      {{"partials_in_storage",
        "mixed precision: the f32 partials rounded to bf16 / f16 before the reduction, while "
        "reduce=f32 is declared (row_parallel: then summed in f32; the other hosts: their own "
        "reduce=<storage> path)",
        "kernel"},
       {{"row_parallel",
         decorate<mutants::partials_in_storage>(),
         {at("K=4096", "dtype=bf16 mode=uniform"), at("K=16384", "dtype=bf16 mode=wide"),
          at("K=16384", "dtype=bf16 mode=positive"), at("K=16384", "dtype=f16 mode=positive")}},
        {"column_row_pair",
         decorate<mutants::storage_path>(),
         {on(pair, "bf16"), on(pair, "f16"), long_chain(pair_long)}},
        {"sequence_parallel_pair",
         decorate<mutants::storage_path>(),
         {on(pair, "bf16"), on(pair, "f16"), long_chain(pair_long)}},
        {"sharded_weights",
         decorate<mutants::storage_path>(),
         {on(dw, "bf16"), on(dw, "f16"), long_chain(dw_long)}}}},
      {{"acc_in_storage",
        "mixed precision: the local contraction summed in bf16 / f16, while acc=f32 is declared",
        "kernel"},
       {{"row_parallel",
         decorate<mutants::acc_in_storage>(),
         {at("K=16384", "dtype=bf16 mode=uniform"), at("K=16384", "dtype=f16 mode=uniform")}}}},
  };
}

std::string cell_name(std::string_view op, std::string_view strategy) {
  return "mutant." + std::string(op) + "@" + std::string(strategy);
}
}  // namespace

std::span<const old_mutant> old_mutants() { return old_table; }

struct mutant_set::impl {
  std::vector<par::registry> owned_strategies;  // empty when built on the caller's registries
  std::vector<const par::kernel*> strategies;
  std::vector<std::string> names;
  std::vector<mutant_operator> operators;
  std::vector<mutant_cell> cells;
  std::vector<std::unique_ptr<par::kernel>> owned;
  // Outside the matrix (mutants.hpp): the hang mutant first, then the final shrinking pass's
  // test, the tree all-reduce's ledger test and the large-K test.
  std::vector<mutant_cell> outside;
};

mutant_set::mutant_set(int max_p) : impl_(std::make_unique<impl>()) {
  impl_->owned_strategies.push_back(par::builtin_strategies());
  impl_->owned_strategies.push_back(collective_checks());
  build({&impl_->owned_strategies[0], &impl_->owned_strategies[1]}, max_p);
}

mutant_set::mutant_set(const par::registry& strategies, int max_p)
    : impl_(std::make_unique<impl>()) {
  build({&strategies}, max_p);
}

mutant_set::mutant_set(const std::vector<const par::registry*>& strategies, int max_p)
    : impl_(std::make_unique<impl>()) {
  build(strategies, max_p);
}

void mutant_set::build(const std::vector<const par::registry*>& strategies, int max_p) {
  impl& m = *impl_;
  for (const par::registry* r : strategies)
    for (const auto& k : r->all()) m.strategies.push_back(k.get());
  const auto find = [&](std::string_view name) -> const par::kernel* {
    for (const par::kernel* k : m.strategies)
      if (k->name() == name) return k;
    return nullptr;
  };
  std::vector<usage> used;
  for (const par::kernel* k : m.strategies) {
    m.names.push_back(k->name());
    used.push_back(usage_of(*k, max_p));
  }
  const auto add = [&](const mutant_operator& op, const std::string& strategy, bool applies,
                       const par::kernel* k, par::layer_wrapper wrap,
                       std::shared_ptr<fire_log> log) {
    m.cells.push_back({cell_name(op.name, strategy), op.name, strategy, applies,
                       subject{k, std::move(wrap)}, std::move(log)});
  };
  for (const fault_op& op : fault_ops()) {
    m.operators.push_back(op.info);
    for (std::size_t i = 0; i < m.names.size(); ++i) {
      auto log = std::make_shared<fire_log>();
      add(op.info, m.names[i], op.applies(used[i]), m.strategies[i],
          wrap_with(op.where, op.make, log), log);
      m.cells.back().s.raw = raw_with(op.where, op.make, log);
    }
  }
  const decorator_op decorators[] = {
      {{"float_inputs", "inputs rounded to float before a f64 case runs", "kernel"},
       decorate<mutants::float_inputs>()},
      {{"copies_w", "a copy of the weights in a std::vector inside forward", "kernel"},
       decorate<mutants::copies_w>()},
      {{"last_w_rows_reversed", "the last weight's local block with its rows reversed", "kernel"},
       decorate<mutants::last_w_rows_reversed>()},
  };
  for (const decorator_op& op : decorators) {
    m.operators.push_back(op.info);
    for (std::size_t i = 0; i < m.names.size(); ++i) {
      const par::kernel& k = *m.strategies[i];
      auto log = std::make_shared<fire_log>();
      m.owned.push_back(op.make(k, cell_name(op.info.name, m.names[i]), log));
      const bool applies = op.info.name != "float_inputs" || k.info().supports(dtype::f64);
      add(op.info, m.names[i], applies, m.owned.back().get(), {}, log);
    }
  }
  for (const algorithm_op& op : algorithm_ops) {
    m.operators.push_back(op.info);
    const par::kernel* host = find(op.host);
    auto log = std::make_shared<fire_log>();
    mutants::algorithm_mutant made;
    if (host != nullptr)
      made = mutants::make_algorithm_mutant(op.info.name, *host, cell_name(op.info.name, op.host),
                                            log);
    if (made.k != nullptr) m.owned.push_back(std::move(made.k));
    add(op.info, op.host, host != nullptr, host != nullptr ? m.owned.back().get() : nullptr,
        std::move(made.wrap), log);
  }
  for (const mixed_op& op : mixed_ops()) {
    m.operators.push_back(op.info);
    for (const mixed_host& h : op.hosts) {
      const par::kernel* host = find(h.host);
      auto log = std::make_shared<fire_log>();
      const std::string name = cell_name(op.info.name, h.host);
      if (host != nullptr) m.owned.push_back(h.make(*host, name, log));
      add(op.info, h.host, host != nullptr, host != nullptr ? m.owned.back().get() : nullptr, {},
          log);
      for (const std::string& line : h.targeted)
        m.cells.back().targeted.push_back("strategy=" + name + " " + line);
    }
  }
  auto log = std::make_shared<fire_log>();
  m.outside.push_back({cell_name("unanswered", "data_parallel"), "unanswered", "data_parallel",
                       false,
                       subject{find("data_parallel"),
                               wrap_with(layer_position::below, maker<mutants::unanswered>(), log)},
                       log});
  // A kernel decorator on a host, outside the matrix.
  const auto outside = [&]<class D>(const char* op, const char* host) {
    const par::kernel* k = find(host);
    if (k == nullptr) return;
    auto own_log = std::make_shared<fire_log>();
    const std::string name = cell_name(op, host);
    m.owned.push_back(std::make_unique<D>(*k, name, own_log));
    m.outside.push_back({name, op, host, false, subject{m.owned.back().get(), {}}, own_log});
  };
  outside.template operator()<mutants::empty_shard_off_by_one>("empty_shard", "data_parallel");
  outside.template operator()<mutants::default_claims>("default_claims", "data_parallel");
  outside.template operator()<mutants::last_k_dropped>("last_k_dropped", "data_parallel");
  outside.template operator()<mutants::last_k_dropped>("last_k_dropped", "row_parallel");
}

mutant_set::~mutant_set() = default;

const mutant_cell* mutant_set::cell(std::string_view name) const {
  for (const mutant_cell& c : impl_->cells)
    if (c.name == name) return &c;
  // The old names, for old replay lines: mutant.dp_drop_last_shard, …, mutant.dp_hang.
  if (name.starts_with("mutant.")) {
    const std::string_view old = name.substr(7);
    if (old == "dp_hang") return cell(impl_->outside.front().name);
    for (const old_mutant& o : old_table)
      if (o.old_name == old) return cell(o.cell);
  }
  for (const mutant_cell& c : impl_->outside)
    if (c.name == name && c.s.k != nullptr) return &c;
  return nullptr;
}

const mutant_cell* mutant_set::cell(std::string_view op, std::string_view strategy) const {
  for (const mutant_cell& c : impl_->cells)
    if (c.op == op && c.strategy == strategy) return &c;
  return nullptr;
}

const subject* mutant_set::find(std::string_view name) const {
  const mutant_cell* c = cell(name);
  return c != nullptr && c->s.k != nullptr ? &c->s : nullptr;
}

const std::vector<mutant_operator>& mutant_set::operators() const { return impl_->operators; }
const std::vector<std::string>& mutant_set::strategies() const { return impl_->names; }
const std::vector<mutant_cell>& mutant_set::cells() const { return impl_->cells; }

}  // namespace shardcheck::prop
