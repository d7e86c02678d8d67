#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "shardcheck/parallel/plan.hpp"
#include "shardcheck/properties/driver.hpp"
#include "shardcheck/properties/footprint.hpp"

namespace shardcheck::commands {

namespace {

using prop::human_bytes;

nlohmann::ordered_json entry_json(const par::ledger_entry& e) {
  nlohmann::ordered_json j = {{"collective", par::to_string(e.kind)},
                              {"axis", e.axis},
                              {"elements", e.elements},
                              {"elem_bytes", e.elem_bytes},
                              {"bytes_sent", e.bytes_sent},
                              {"bytes_received", e.bytes_received}};
  if (e.root >= 0) j[std::string(par::root_name(e.kind))] = e.root;
  return j;
}

// One dimension of an explained block: "3+4" (offset+length), or a tiled dimension's runs
// "0+2|4+2|8+1" (the first three and the last of longer lists, with their count).
std::string runs_text(const nlohmann::ordered_json& b, const std::string& dim) {
  const auto runs = b.find(dim + "_runs");
  if (runs == b.end())
    return std::to_string(b[dim + "0"].get<std::int64_t>()) + "+" +
           std::to_string(b[dim + "s"].get<std::int64_t>());
  std::string out;
  const std::size_t n = runs->size();
  for (std::size_t i = 0; i < n; ++i) {
    if (n > 4 && i == 3) {
      out += "|…";
      i = n - 1;
    }
    if (i != 0) out += '|';
    out += std::to_string((*runs)[i][0].get<std::int64_t>()) + "+" +
           std::to_string((*runs)[i][1].get<std::int64_t>());
  }
  if (n > 4) out += " (" + std::to_string(n) + " runs)";
  return out;
}

// What every rank of the world recorded running case c once (recorded_ledger), on rank 0; empty
// lists elsewhere. Each entry travels as 8 integers. \note collective over MPI_COMM_WORLD.
std::vector<std::vector<par::ledger_entry>> gather_recorded(const par::kernel& k,
                                                            const par::run_case& c) {
  par::comm world = par::comm::world();
  if (world.size() != c.p)
    throw usage_error("explain --record runs the case: launch it on p=" + std::to_string(c.p) +
                      " ranks (mpirun -n " + std::to_string(c.p) + "), not " +
                      std::to_string(world.size()));
  const auto mine = prop::recorded_ledger(prop::subject{&k, {}}, c, world);
  constexpr int fields = 8;
  std::vector<std::int64_t> flat;
  for (const par::ledger_entry& e : mine)
    flat.insert(flat.end(), {static_cast<std::int64_t>(e.when), static_cast<std::int64_t>(e.kind),
                             e.axis, static_cast<std::int64_t>(e.elem_bytes), e.elements,
                             e.bytes_sent, e.bytes_received, e.root});
  int count = static_cast<int>(flat.size());
  std::vector<int> counts(static_cast<std::size_t>(world.size())), displs(counts.size());
  MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, world.native_handle());
  for (std::size_t r = 1; r < counts.size(); ++r) displs[r] = displs[r - 1] + counts[r - 1];
  std::vector<std::int64_t> all(
      world.rank() == 0 ? static_cast<std::size_t>(displs.back() + counts.back()) : 0);
  MPI_Gatherv(flat.data(), count, MPI_INT64_T, all.data(), counts.data(), displs.data(),
              MPI_INT64_T, 0, world.native_handle());
  std::vector<std::vector<par::ledger_entry>> out(world.rank() == 0 ? counts.size() : 0);
  for (std::size_t r = 0; r < out.size(); ++r)
    for (int i = displs[r]; i < displs[r] + counts[r]; i += fields) {
      const std::int64_t* f = all.data() + i;
      out[r].push_back({static_cast<par::phase>(f[0]), static_cast<par::collective>(f[1]),
                        static_cast<int>(f[2]), static_cast<std::size_t>(f[3]), f[4], f[5], f[6],
                        static_cast<int>(f[7])});
    }
  return out;
}

// explain shows every rank up to this many, else the first two and the last unless --rank says.
constexpr int explain_all_ranks = 64;

// The recorded entries of one phase as explain's JSON: every entry, and the bytes sent and
// received.
nlohmann::ordered_json recorded_json(const std::vector<par::ledger_entry>& entries, par::phase p) {
  nlohmann::ordered_json rec = {
      {"bytes_sent", 0}, {"bytes_received", 0}, {"entries", nlohmann::ordered_json::array()}};
  for (const par::ledger_entry& e : entries) {
    if (e.when != p) continue;
    rec["entries"].push_back(entry_json(e));
    rec["bytes_sent"] = rec["bytes_sent"].get<std::int64_t>() + e.bytes_sent;
    rec["bytes_received"] = rec["bytes_received"].get<std::int64_t>() + e.bytes_received;
  }
  return rec;
}

// "  recorded forward: 4 × broadcast; sent 16384 B, received 16384 B" (`who`: "recorded" or
// "recorded by summa").
void print_recorded(const nlohmann::ordered_json& rec, const std::string& who, const char* phase) {
  std::map<std::string, int> kinds;
  for (const auto& e : rec["entries"]) ++kinds[e["collective"].get<std::string>()];
  std::cout << "  " << who << " " << phase << ":";
  if (kinds.empty()) std::cout << " nothing";
  for (const auto& [kind, n] : kinds) std::cout << " " << n << " × " << kind;
  std::cout << "; sent " << rec["bytes_sent"] << " B, received " << rec["bytes_received"] << " B\n";
}

// What every rank recorded running the case (mine) and, with --beside, the other strategy's
// case (other, beside); on rank 0, empty without --record.
struct recorded_runs {
  std::vector<std::vector<par::ledger_entry>> mine, beside;
  par::run_case other;
};

// One rank's part of explain's JSON: its blocks, its claimed collectives per phase, what it
// recorded (with --record), its peak bound, footprint and chains.
nlohmann::ordered_json rank_json(const par::kernel& s, const par::run_case& c, int r,
                                 const recorded_runs& rec) {
  const auto dims = s.mesh_dims(c);
  const auto coords = par::coords_of(r, dims);
  const par::case_plan plan = par::plan_of(s, c, coords);
  const par::claims cost = s.cost(c, coords);
  nlohmann::ordered_json rank = {{"rank", r}, {"coords", coords}};
  for (const par::tensor_plan& t : plan.tensors) {
    const par::block& b = t.region;
    rank["blocks"][t.name] = {
        {"row0", b.row0}, {"rows", b.rows}, {"col0", b.col0}, {"cols", b.cols}};
    // A block-cyclic dimension's tiles: its runs as [offset, length] pairs.
    for (const auto& [key, runs] :
         {std::pair{"row_runs", &b.row_runs}, std::pair{"col_runs", &b.col_runs}})
      for (const par::index_run& run : *runs)
        rank["blocks"][t.name][key].push_back({run.offset, run.length});
  }
  if (cost.collectives) {
    for (const auto& [phase, list] : {std::pair{"forward", &cost.collectives->forward},
                                      std::pair{"backward", &cost.collectives->backward}}) {
      rank[phase] = nlohmann::ordered_json::array();
      for (const auto& e : *list) rank[phase].push_back(entry_json(e));
    }
  } else {
    rank["forward"] = rank["backward"] = "not claimed";
  }
  if (!rec.mine.empty()) {
    // As recorded, per phase: every entry, and the bytes this rank sent and received.
    const auto at = static_cast<std::size_t>(r);
    for (const auto& [phase, p] :
         {std::pair{"forward", par::phase::forward}, std::pair{"backward", par::phase::backward}}) {
      rank["recorded"][phase] = recorded_json(rec.mine[at], p);
      if (!rec.beside.empty()) {
        rank["beside"]["strategy"] = rec.other.strategy;
        rank["beside"]["case"] = rec.other.to_string();
        rank["beside"][phase] = recorded_json(rec.beside[at], p);
      }
    }
  }
  if (cost.peak)
    rank["peak_bytes_bound"] = {{"forward", cost.peak->forward}, {"backward", cost.peak->backward}};
  else
    rank["peak_bytes_bound"] = "not claimed";
  rank["footprint_bytes"] = prop::rank_footprint(s, c, coords);
  if (!cost.chains) {
    rank["chain_lengths"] = "not claimed";
  } else if (cost.chains->size() == 1) {
    const auto& ch = cost.chains->front();
    rank["chain_lengths"] = {{"Y", ch.y}, {"dX", ch.dx}, {"dW", ch.dw}};
    // The share of each chain added across ranks (in the reduce dtype); the rest is local.
    rank["chain_reduced"] = {{"Y", ch.reduced.y}, {"dX", ch.reduced.dx}, {"dW", ch.reduced.dw}};
  } else {
    // Per layer l: H_l (Y for the last), dA_{l−1} (dX for the first), dW_l.
    for (std::size_t l = 0; l < cost.chains->size(); ++l) {
      const auto& ch = (*cost.chains)[l];
      const std::string n = std::to_string(l + 1);
      rank["chain_lengths"][l + 1 == cost.chains->size() ? "Y" : "H" + n] = ch.y;
      rank["chain_lengths"][l == 0 ? "dX" : "dA" + std::to_string(l)] = ch.dx;
      rank["chain_lengths"]["dW" + n] = ch.dw;
    }
  }
  return rank;
}

// explain's text: the case, its placements and policy, the collectives per phase, then per rank
// its blocks, collectives, recorded traffic, peak bound, footprint and chains.
void print_text(const nlohmann::ordered_json& out, const par::kernel& s, const par::run_case& c,
                const std::vector<int>& ranks, const std::string& beside) {
  const std::string& name = c.strategy;
  const auto& totals = out["collectives_per_phase"];
  const par::case_plan plan0 = par::plan_of(s, c, par::coords_of(0, s.mesh_dims(c)));
  std::cout << name << ": " << s.info().summary << "\ncase: " << c.to_string()
            << "\nplacements: " << placements_line(plan0) << "\n";
  // A 16-bit case: its policy, and below each rank's chains split into local and reduced parts.
  const bool mixed = is_storage16(c.prob.type);
  if (mixed)
    std::cout << "precision: " << to_string(c.prob.type) << " storage, local sums in "
              << to_string(c.policy.acc) << ", partial sums reduced in "
              << to_string(c.policy.reduce) << "\n";
  for (const auto& [key, part] : c.parts)
    std::cout << "partition " << key << ": " << part.to_string() << "\n";
  for (const char* phase : {"forward", "backward"}) {
    std::cout << phase << ":";
    if (totals[phase].empty())
      std::cout << (out["ranks"][0][phase].is_array() ? " no collectives"
                                                      : " collectives not claimed");
    for (const auto& [kind, n] : totals[phase].items()) std::cout << " " << n << " × " << kind;
    std::cout << "\n";
  }
  if (out.contains("ranks_shown"))
    std::cout << "showing ranks " << join(ranks) << " of " << c.p << " (--rank R for others)\n";
  for (const auto& rank : out["ranks"]) {
    std::cout << "rank " << rank["rank"].get<int>() << ":";
    for (const auto& [t, b] : rank["blocks"].items())
      std::cout << " " << t << "[" << runs_text(b, "row") << ", " << runs_text(b, "col") << "]";
    std::cout << "\n";
    for (const char* phase : {"forward", "backward"}) {
      if (!rank[phase].is_array()) {
        std::cout << "  " << phase << ": collectives not claimed\n";
        continue;
      }
      for (const auto& e : rank[phase]) {
        std::cout << "  " << phase << " " << e["collective"].get<std::string>();
        if (e.contains("peer"))
          std::cout << (e["collective"] == "send" ? " to " : " from ") << e["peer"];
        if (e.contains("root")) std::cout << " root " << e["root"];
        std::cout << " (axis " << e["axis"] << "): " << e["elements"] << " elements, sent "
                  << e["bytes_sent"] << " B, received " << e["bytes_received"] << " B\n";
      }
    }
    if (rank.contains("recorded"))
      for (const char* phase : {"forward", "backward"}) {
        print_recorded(rank["recorded"][phase], "recorded", phase);
        if (rank.contains("beside"))
          print_recorded(rank["beside"][phase], "recorded by " + beside, phase);
      }
    const auto& peak = rank["peak_bytes_bound"];
    if (peak.is_object())
      std::cout << "  peak memory bound: forward " << peak["forward"] << " B, backward "
                << peak["backward"] << " B";
    else
      std::cout << "  peak memory bound: not claimed";
    std::cout << "; footprint " << human_bytes(rank["footprint_bytes"].get<std::int64_t>());
    std::cout << "; error-bound chains:";
    if (!rank["chain_lengths"].is_object()) std::cout << " not claimed";
    const char* sep = " ";
    for (const auto& [key, k] : rank["chain_lengths"].items()) {
      if (!rank["chain_lengths"].is_object()) break;
      std::cout << sep << key << " " << k;
      // Y 19 (16 local in f32 + 3 reduced in bf16)
      if (mixed && rank.contains("chain_reduced")) {
        const std::int64_t red =
            std::min(rank["chain_reduced"][key].get<std::int64_t>(), k.get<std::int64_t>());
        std::cout << " (" << k.get<std::int64_t>() - red << " local in " << to_string(c.policy.acc)
                  << " + " << red << " reduced in " << to_string(c.policy.reduce) << ")";
      }
      sep = ", ";
    }
    std::cout << "\n";
  }
}

// --record (and --beside: another strategy on the same shape, workers and, where it has them,
// parameters, recorded the same way, so that two kernels' traffic reads side by side per rank).
recorded_runs record_runs(const catalogue& cat, const par::kernel& s, const par::run_case& c,
                          bool record, const std::string& beside) {
  if (!beside.empty() && !record) throw usage_error("--beside needs --record");
  recorded_runs rec;
  rec.other = c;
  if (!beside.empty()) {
    const par::kernel& b = cat.need(beside);
    rec.other.strategy = beside;
    rec.other.parts.clear();
    rec.other.params.clear();
    for (const par::param_spec& ps : b.info().params)
      if (const auto it = c.params.find(ps.name); it != c.params.end())
        rec.other.params[ps.name] = it->second;
    par::complete_and_validate(b, rec.other);
  }
  if (record) rec.mine = gather_recorded(s, c);
  if (!beside.empty()) rec.beside = gather_recorded(cat.need(beside), rec.other);
  return rec;
}

int do_explain(const catalogue& cat, const std::string& name, par::run_case c, bool json,
               std::vector<int> ranks, bool record, const std::string& beside) {
  const par::kernel& s = cat.need(name);
  c.strategy = name;
  par::complete_and_validate(s, c);
  const recorded_runs rec = record_runs(cat, s, c, record, beside);
  if (record && rec.mine.empty()) return 0;  // rank > 0: rank 0 prints
  const auto dims = s.mesh_dims(c);
  const par::case_plan plan0 = par::plan_of(s, c, par::coords_of(0, dims));
  nlohmann::ordered_json out;
  out["strategy"] = name;
  out["summary"] = s.info().summary;
  out["case"] = c.to_string();
  out["mesh"] = dims;
  if (is_storage16(c.prob.type))
    out["precision"] = {{"dtype", to_string(c.prob.type)},
                        {"acc", to_string(c.policy.acc)},
                        {"reduce", to_string(c.policy.reduce)}};
  for (const par::tensor_plan& t : plan0.tensors)
    out["placements"][t.name] = par::to_string(t.where);
  for (const auto& [key, part] : c.parts) out["partitions"][key] = part.sizes();
  nlohmann::ordered_json totals = {{"forward", nlohmann::ordered_json::object()},
                                   {"backward", nlohmann::ordered_json::object()}};
  for (int r : ranks)
    if (r < 0 || r >= c.p)
      throw usage_error("--rank " + std::to_string(r) + ": ranks are 0 … " +
                        std::to_string(c.p - 1));
  const bool chosen = !ranks.empty();
  if (!chosen && c.p <= explain_all_ranks)
    for (int r = 0; r < c.p; ++r) ranks.push_back(r);
  if (!chosen && c.p > explain_all_ranks) ranks = {0, 1, c.p - 1};
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  if (static_cast<int>(ranks.size()) < c.p) out["ranks_shown"] = ranks;
  // The totals per phase are rank 0's, whichever ranks are shown.
  const par::claims cost0 = s.cost(c, par::coords_of(0, dims));
  if (cost0.collectives)
    for (const auto& [phase, list] : {std::pair{"forward", &cost0.collectives->forward},
                                      std::pair{"backward", &cost0.collectives->backward}})
      for (const auto& e : *list) {
        auto& n = totals[phase][std::string(par::to_string(e.kind))];
        n = n.is_null() ? 1 : n.get<int>() + 1;
      }
  for (int r : ranks) out["ranks"].push_back(rank_json(s, c, r, rec));
  out["collectives_per_phase"] = totals;
  if (json) {
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  print_text(out, s, c, ranks, beside);
  return 0;
}

// explain's options, as given.
struct explain_options {
  std::string acc, reduce;  // empty: f32 (a 16-bit case's default policy)
  std::string name, dtype = "f64", layout = "out_in", backend = "mpi", hidden, act = "identity";
  int p = 1;
  std::int64_t m = 0, n = 0, k = 0;
  std::vector<std::string> parts, params;
  bool json = false;
  std::vector<int> ranks;
  bool record = false;
  std::string beside;
};

// The case explain's options describe.
par::run_case case_of(const catalogue& cat, const explain_options& o) {
  par::run_case c = default_case(cat.need(o.name), o.p, o.m, o.n, o.k);
  c.prob.type = parse_dtype(o.dtype);
  // --acc, --reduce: a 16-bit case's precision policy, as acc= reduce= on a replay line.
  if (!o.acc.empty() || !o.reduce.empty()) {
    if (!is_storage16(c.prob.type))
      throw usage_error("--acc and --reduce are only for --dtype bf16 or f16, not " + o.dtype);
    if (!o.acc.empty()) c.policy.acc = parse_dtype(o.acc);
    if (!o.reduce.empty()) c.policy.reduce = parse_dtype(o.reduce);
    validate_policy(c.prob.type, c.policy);
  }
  c.prob.layout = parse_weight_layout(o.layout);
  c.backend = par::parse_backend_spec(o.backend);
  if (!o.hidden.empty()) c.prob.hidden = par::partition::parse(o.hidden).sizes();
  c.prob.act = parse_activation(o.act);
  for (const auto& kv : o.parts) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos) throw usage_error("--part expects DIM=sizes, got '" + kv + "'");
    if (!c.parts.emplace(kv.substr(0, eq), par::partition::parse(kv.substr(eq + 1))).second)
      throw usage_error("--part " + kv.substr(0, eq) + " given twice");
  }
  for (const auto& kv : o.params) {
    const auto [name, value] = parse_param(kv, "--param");
    if (!c.params.emplace(name, value).second)
      throw usage_error("--param " + name + " given twice");
  }
  return c;
}

}  // namespace

runner::command explain(CLI::App& app, const catalogue& cat) {
  auto o = std::make_shared<explain_options>();
  auto* explain = app.add_subcommand(
      "explain", "Show a strategy's layouts, collectives per phase and memory bound");
  explain->add_option("--strategy", o->name, "Strategy")->required();
  explain->add_option("-p", o->p, "Workers")->required();
  explain->add_option("--M", o->m, "Rows of X (batch)")->required();
  explain->add_option("--N", o->n, "Output features")->required();
  explain->add_option("--K", o->k, "Input features")->required();
  explain->add_option("--dtype", o->dtype, "f32, f64, bf16 or f16 (16-bit: acc=f32 reduce=f32)")
      ->capture_default_str();
  explain->add_option("--acc", o->acc, "bf16/f16: the dtype local sums are in (f32 or the dtype)");
  explain->add_option(
      "--reduce", o->reduce,
      "bf16/f16: the dtype partial sums travel and are added in (f32 or the dtype)");
  explain->add_option("--layout", o->layout, "out_in or in_out")->capture_default_str();
  explain
      ->add_option("--backend", o->backend,
                   "mpi or native: whose byte counts and reduction "
                   "depths")
      ->capture_default_str();
  explain->add_option("--H", o->hidden, "Hidden widths of a stack, e.g. 6 or 6,4");
  explain->add_option("--act", o->act, "Activation of a stack: identity or relu")
      ->capture_default_str();
  explain->add_option("--part", o->parts, "A partition, e.g. M=3,0,4 (default balanced)");
  explain->add_option("--param", o->params, "A strategy parameter, e.g. gather=0");
  explain->add_flag("--json", o->json, "JSON output");
  explain->add_option("--rank", o->ranks,
                      "Show only these ranks (repeatable; default: every rank up to 64, else "
                      "ranks 0, 1 and the last)");
  explain->add_option("--beside", o->beside,
                      "With --record: record this strategy too, on the same shape, workers and "
                      "parameters (those it has), and show its traffic beside, rank by rank");
  explain->add_flag("--record", o->record,
                    "Run the case once on p ranks (under mpirun) and show what each rank recorded");

  return {explain, [o] { return o->record; },
          [o, &cat] {
            return do_explain(cat, o->name, case_of(cat, *o), o->json, o->ranks, o->record,
                              o->beside);
          }};
}

}  // namespace shardcheck::commands
