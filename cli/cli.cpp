#include "shardcheck/cli.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "shardcheck/parallel/memory.hpp"
#include "shardcheck/properties/checks.hpp"
#include "shardcheck/properties/driver.hpp"
#include "shardcheck/properties/exit_codes.hpp"
#include "shardcheck/properties/footprint.hpp"
#include "shardcheck/properties/last_words.hpp"
#include "shardcheck/properties/mutants.hpp"
#include "shardcheck/properties/selftest.hpp"
#include "src/audit.hpp"
#include "src/compare.hpp"
#include "src/corpus.hpp"
#include "src/dump.hpp"
#include "src/results.hpp"
#include "src/scale.hpp"

namespace shardcheck {

namespace {

using prop::human_bytes;

// s with every byte outside printable ASCII written as \xNN: a message never echoes a control
// sequence to the terminal.
std::string printable(std::string_view s) {
  std::string out;
  for (const char ch : s) {
    const auto b = static_cast<unsigned char>(ch);
    if (b >= 0x20 && b < 0x7f) {
      out += ch;
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", b);
      out += hex;
    }
  }
  return out;
}

struct usage_error : error {
  using error::error;
};

// Built-in, collective checks (checks.hpp), extra and (for replay lines and explicit --strategy
// only) mutant kernels, each as the subject a case runs.
struct catalogue {
  par::registry builtin = par::builtin_strategies();
  par::registry checks = prop::collective_checks();
  par::registry extra;
  prop::mutant_set mutants{{&builtin, &checks}};
  // The extra kernels' cells (verify --strategy mutant.<operator>@<kernel>); selftest's matrix is
  // the built-in one.
  prop::mutant_set extra_mutants;
  std::map<std::string, prop::subject, std::less<>> plain;

  explicit catalogue(par::registry more) : extra(std::move(more)), extra_mutants(extra) {
    for (const par::registry* r : {&builtin, &checks, &extra})
      for (const auto& k : r->all()) plain.emplace(k->name(), prop::subject{k.get(), {}});
  }
  [[nodiscard]] const prop::subject* find(std::string_view name) const {
    if (const auto it = plain.find(name); it != plain.end()) return &it->second;
    if (const prop::subject* m = mutants.find(name)) return m;
    return extra_mutants.find(name);
  }
  // The mutant cell of that name, or nullptr.
  [[nodiscard]] const prop::mutant_cell* cell(std::string_view name) const {
    if (const prop::mutant_cell* c = mutants.cell(name)) return c;
    return extra_mutants.cell(name);
  }
  // Every kernel verify checks (the collective checks included).
  [[nodiscard]] std::vector<const par::kernel*> normal() const {
    std::vector<const par::kernel*> out;
    for (const par::registry* r : {&builtin, &checks, &extra})
      for (const auto& k : r->all()) out.push_back(k.get());
    return out;
  }
  // The strategies compare, audit and scale measure (not the collective checks).
  [[nodiscard]] std::vector<const par::kernel*> strategies() const {
    std::vector<const par::kernel*> out;
    for (const par::registry* r : {&builtin, &extra})
      for (const auto& k : r->all()) out.push_back(k.get());
    return out;
  }
  [[nodiscard]] const par::kernel& need(const std::string& name) const {
    const prop::subject* s = find(name);
    if (s == nullptr) {
      std::string known;
      for (const auto* n : normal()) {
        if (!known.empty()) known += ", ";
        known += n->name();
      }
      throw usage_error("unknown strategy '" + printable(name) + "' (known: " + known +
                        "; and mutant.<operator>@<kernel>, listed by selftest)");
    }
    return *s->k;
  }
};

std::string placements_line(const par::case_plan& plan) {
  std::string out;
  for (const par::tensor_plan& t : plan.tensors) {
    if (!out.empty()) out += "  ";
    out += t.name;
    out += ' ';
    out += par::to_string(t.where);
  }
  return out;
}

template <class T>
std::string join(const std::vector<T>& values) {
  using std::to_string;
  std::string out;
  for (const T& v : values) {
    if (!out.empty()) out += ",";
    out += to_string(v);
  }
  return out;
}

// A case for `list` and `explain`: the strategy's defaults on a given shape.
par::run_case default_case(const par::kernel& s, int p, std::int64_t m, std::int64_t n,
                           std::int64_t k) {
  par::run_case c;
  c.strategy = s.name();
  c.p = p;
  c.prob.M = m;
  c.prob.N = n;
  c.prob.K = k;
  // A stack strategy's smallest stack, hidden widths 1 (explain's --H replaces them).
  c.prob.hidden.assign(s.info().min_layers - 1, 1);
  return c;
}

// The case `list` shows a kernel's placements on: p = 1 and M = N = K = 1, or else the smallest
// of a few the kernel takes (it may decline the first: a minimum size, a square grid of 4).
par::run_case listing_case(const par::kernel& s) {
  for (int p = 1; p <= 16; ++p)
    for (const std::int64_t n : {1, 2, 4, 8, 16, 64, 256}) {
      par::run_case d = default_case(s, p, n, n, n);
      try {
        par::complete_and_validate(s, d);
        return d;
      } catch (const par::case_declined&) {
        continue;
      }
    }
  throw invalid_problem(s.name() + " declines every case of p ≤ 16 and M = N = K ≤ 256");
}

int do_list(const catalogue& cat) {
  for (const auto* s : cat.normal()) {
    const par::run_case c = listing_case(*s);
    const par::kernel_info& info = s->info();
    const par::case_plan plan = par::plan_of(*s, c, par::coords_of(0, s->mesh_dims(c)));
    std::printf("%s\n  %s\n  placements (%zu-axis mesh, defaults): %s\n", info.name.c_str(),
                info.summary.c_str(), plan.dims.size(), placements_line(plan).c_str());
    std::printf("  layers %zu", info.min_layers);
    if (info.max_layers != info.min_layers) std::printf("-%zu", info.max_layers);
    std::printf("; dtypes %s; layouts %s; modes %s%s\n", join(info.dtypes).c_str(),
                join(info.layouts).c_str(), join(info.modes).c_str(),
                info.uses_collectives ? "" : "; point-to-point only");
    if (!info.policies.empty()) {
      std::string pols;
      for (const precision& pol : info.policies)
        pols += (pols.empty() ? "" : ", ") + to_string(pol);
      std::printf("  precision policies (bf16, f16): %s\n", pols.c_str());
    }
    for (const auto& ps : info.params)
      std::printf("  parameter %s in [%lld, %lld], default %lld: %s\n", ps.name.c_str(),
                  static_cast<long long>(ps.min), static_cast<long long>(ps.max),
                  static_cast<long long>(ps.fallback), ps.help.c_str());
    if (const std::string takes = par::to_string(info.takes); !takes.empty())
      std::printf("  takes only: %s\n", takes.c_str());
    if (!info.deterministic) std::printf("  not deterministic by design\n");
  }
  return 0;
}

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

int do_explain(const catalogue& cat, const std::string& name, par::run_case c, bool json,
               std::vector<int> ranks, bool record, const std::string& beside) {
  const par::kernel& s = cat.need(name);
  c.strategy = name;
  par::complete_and_validate(s, c);
  if (!beside.empty() && !record) throw usage_error("--beside needs --record");
  // --beside: another strategy on the same shape, workers and (where it has them) parameters,
  // recorded the same way, so that two kernels' traffic reads side by side per rank.
  par::run_case other = c;
  if (!beside.empty()) {
    const par::kernel& b = cat.need(beside);
    other.strategy = beside;
    other.parts.clear();
    other.params.clear();
    for (const par::param_spec& ps : b.info().params)
      if (const auto it = c.params.find(ps.name); it != c.params.end())
        other.params[ps.name] = it->second;
    par::complete_and_validate(b, other);
  }
  const std::vector<std::vector<par::ledger_entry>> recorded =
      record ? gather_recorded(s, c) : std::vector<std::vector<par::ledger_entry>>{};
  const std::vector<std::vector<par::ledger_entry>> recorded_beside =
      beside.empty() ? std::vector<std::vector<par::ledger_entry>>{}
                     : gather_recorded(cat.need(beside), other);
  if (record && recorded.empty()) return 0;  // rank > 0: rank 0 prints
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
  for (int r : ranks) {
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
    if (record) {
      // As recorded, per phase: every entry, and the bytes this rank sent and received.
      const auto at = static_cast<std::size_t>(r);
      for (const auto& [phase, p] : {std::pair{"forward", par::phase::forward},
                                     std::pair{"backward", par::phase::backward}}) {
        rank["recorded"][phase] = recorded_json(recorded[at], p);
        if (!beside.empty()) {
          rank["beside"]["strategy"] = beside;
          rank["beside"]["case"] = other.to_string();
          rank["beside"][phase] = recorded_json(recorded_beside[at], p);
        }
      }
    }
    if (cost.peak)
      rank["peak_bytes_bound"] = {{"forward", cost.peak->forward},
                                  {"backward", cost.peak->backward}};
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
    out["ranks"].push_back(rank);
  }
  out["collectives_per_phase"] = totals;
  if (json) {
    std::cout << out.dump(2) << "\n";
    return 0;
  }
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
  return 0;
}

// printf into a string: the table is printed at the end and, on an interrupt, so far.
template <class... A>
void appendf(std::string& out, const char* format, A... args) {
  const int n = std::snprintf(nullptr, 0, format, args...);
  if (n <= 0) return;
  const std::size_t at = out.size();
  out.resize(at + static_cast<std::size_t>(n) + 1);
  std::snprintf(out.data() + at, static_cast<std::size_t>(n) + 1, format, args...);
  out.resize(at + static_cast<std::size_t>(n));
}

// A share of a bound: "-" where the tier was not applied (exact mode, bitwise).
std::string share_text(double v) {
  if (v < 0) return "-";
  std::string out;
  appendf(out, "%.2g", v);
  return out;
}

// Under a strategy's row, one line per dtype judged: per output tensor the worst error in
// u·|X||W|ᵀ and, in brackets, the worst share of the rigorous and the statistical bound used, e.g.
//   f32  Y 0.31 [1.2e-05 0.021]  dX 0.25 [8.8e-06 0.017]  dW 0.4 [2.1e-05 0.03]
std::string error_rows(const prop::error_figures& e) {
  std::string out;
  for (std::size_t t = 0; t < prop::error_figures::dtypes; ++t) {
    const auto type = static_cast<dtype>(t);
    std::string line;
    for (const par::tensor x : {par::tensor::y, par::tensor::dx, par::tensor::dw}) {
      const prop::error_cell c = e.over_modes(type, x);
      if (c.err_u_mag < 0) continue;
      appendf(line, "  %s %.3g [%s %s]", std::string(par::to_string(x)).c_str(), c.err_u_mag,
              share_text(c.rigorous).c_str(), share_text(c.statistical).c_str());
    }
    if (!line.empty()) appendf(out, "  %s%s\n", std::string(to_string(type)).c_str(), line.c_str());
  }
  return out;
}

// Under a strategy's row, the cases drawn that the kernel declined (its preconditions), e.g.
//   declined: 212 drawn cases, never run (e.g. p=3 is not a perfect square)
std::string declined_line(std::int64_t declined, const std::string& example) {
  std::string out;
  if (declined > 0)
    appendf(out, "  declined: %lld drawn cases, never run (e.g. %s)\n",
            static_cast<long long>(declined), example.c_str());
  return out;
}

// The table's first column fits the longest name (a mutant's is long).
std::string report_row(const prop::strategy_report& r, int width,
                       const std::string& survived = {}) {
  const auto memory = static_cast<unsigned>(prop::property::memory);
  const std::string peak = (r.not_claimed & memory) != 0 ? "not claimed"
                           : (r.not_measured & memory) != 0
                               ? "not measured"
                               : human_bytes(r.peak_bytes) + " / " + human_bytes(r.bound_bytes);
  std::string out;
  appendf(out, "%-*s %6d  %-4s %8.2f s  %s\n", width, r.name.c_str(), r.cases,
          !r.passed          ? "FAIL"
          : survived.empty() ? "pass"
                             : survived.c_str(),
          r.seconds, peak.c_str());
  out += error_rows(r.errors);
  if (r.not_claimed != 0)
    appendf(out, "  not claimed (never judged): %s\n",
            prop::properties_to_string(r.not_claimed).c_str());
  // What a kernel that claims no collectives really moved, as recorded.
  if ((r.not_claimed & static_cast<unsigned>(prop::property::ledger)) != 0)
    appendf(out, "  recorded: at most %s sent by one rank in one case\n",
            human_bytes(r.recorded_sent).c_str());
  if (r.not_measured != 0)
    appendf(out, "  not measured (never judged): %s\n",
            prop::properties_to_string(r.not_measured).c_str());
  out += declined_line(r.declined, r.declined_example);
  return out;
}

// Said once per run: without shardcheck::new_hook plain new goes uncounted, so `memory` can only
// fail (a peak of matrix buffers alone above the bound), never pass.
void warn_if_unmeasured(unsigned mask) {
  if ((mask & static_cast<unsigned>(prop::property::memory)) == 0 || mem::global_new_tracked())
    return;
  std::printf(
      "shardcheck verify: this program does not link shardcheck::new_hook (link "
      "shardcheck::shardcheck), so allocations through plain new are not counted: memory is "
      "reported not measured\n");
}

// A failing case as the result files keep it: `c` null when RapidCheck could not run at all.
results::failure_record record_of(std::string source, int line, const prop::case_verdict& v,
                                  const par::run_case* c, const std::string& program,
                                  unsigned mask) {
  results::failure_record f;
  f.source = std::move(source);
  f.line = line;
  f.failed = v.failed;
  f.message = v.message;
  if (f.failed == 0) f.failed = static_cast<unsigned>(prop::property::runs);
  if (c != nullptr) {
    f.case_line = c->to_string();
    f.replay = prop::replay_command(program, *c, mask);
  }
  return f;
}

// e.g. "FAIL data_parallel: forward: Y[i=0, j=0] … (corpus line 3)", the failing properties and
// the replay command.
std::string failure_text(const std::string& name, const results::failure_record& f) {
  std::string out;
  appendf(out, "FAIL %s: %s", name.c_str(), f.message.c_str());
  if (f.line > 0) appendf(out, " (%s line %d)", f.source.c_str(), f.line);
  out += "\n";
  const unsigned runs = static_cast<unsigned>(prop::property::runs);
  std::string failing = prop::properties_to_string(f.failed);
  if ((f.failed & runs) != 0 && f.failed != runs) failing = "runs," + failing;
  appendf(out, "  failing properties: %s\n", failing.c_str());
  if (!f.replay.empty()) appendf(out, "  replay: %s\n", f.replay.c_str());
  return out;
}

std::string table_header(int width) {
  std::string out;
  appendf(out, "%-*s cases  result     time  measured peak / bound\n", width + 1, "strategy");
  appendf(out, "  dtype  tensor err/u·|X||W|ᵀ [share of the rigorous bound, of the statistical]\n");
  return out;
}

// The table of the strategies finished so far, then their failures.
std::string suite_table(const results::run_results& rr) {
  int width = 28;
  for (const auto& r : rr.strategies) width = std::max(width, static_cast<int>(r.name.size()));
  std::string out = table_header(width);
  for (const auto& res : rr.strategies) {
    prop::strategy_report r;
    r.name = res.name;
    r.cases = res.cases;
    r.passed = res.passed();
    r.not_claimed = res.not_claimed;
    r.not_measured = res.not_measured;
    r.seconds = res.seconds;
    r.worst_error = res.worst_error;
    r.errors = res.errors;
    r.peak_bytes = res.peak_bytes;
    r.recorded_sent = res.recorded_sent;
    r.bound_bytes = res.bound_bytes;
    r.declined = res.declined;
    r.declined_example = res.declined_example;
    out += report_row(r, width, res.survived);
    if (res.survived == "never acted")
      appendf(out, "  mutant never acted: its fault found nothing to change in any case\n");
    else if (!res.survived.empty())
      appendf(out, "  mutant not caught: its fault acted and every judged property held\n");
  }
  return out;
}

std::string failures_text(const results::run_results& rr) {
  std::string out;
  for (const auto& r : rr.strategies)
    for (const auto& f : r.failures) out += failure_text(r.name, f);
  return out;
}

struct verify_options {
  std::vector<std::string> strategies;
  int cases = 200;
  std::uint64_t seed = 1;
  std::string replay;
  std::string properties = "all";
  double case_timeout = 120;
  bool quiet = false;
  std::string backend;              // empty: drawn per case
  int p = 0;                        // 0: drawn per case
  std::vector<std::string> params;  // name=value, pinned
  std::string replay_file;          // replay lines, one a line ("-": stdin)
  std::string corpus;               // replayed first, then new shrunk failures appended
  std::string junit, json;          // result files, rewritten as each strategy finishes
  std::string memory_limit_text;    // bytes per rank, e.g. "2GiB"; empty: default_memory_limit
  std::string log_cases;            // every case line appended before it runs
  std::string dump;                 // with --replay: the case's values as .npy files here
};

// (name, kernel) of each strategy to check; a name may be a mutant's. Default: every strategy;
// with a backend pinned, those that issue no collective (the backend runs nothing of theirs) are
// left out.
std::vector<std::pair<std::string, const par::kernel*>> chosen_strategies(const catalogue& cat,
                                                                          const verify_options& o,
                                                                          bool backend_pinned) {
  std::vector<std::pair<std::string, const par::kernel*>> chosen;
  for (const auto& name : o.strategies) chosen.emplace_back(name, &cat.need(name));
  if (chosen.empty())
    for (const auto* s : cat.normal())
      if (!backend_pinned || s->info().uses_collectives) chosen.emplace_back(s->name(), s);
  return chosen;
}

// "name=integer", a strategy parameter given as `option` (--param), or usage_error: "gather=1
// mode=exact", "gather=" and "gather=99999999999999999999" (past 64 bits) are refused.
std::pair<std::string, std::int64_t> parse_param(const std::string& kv, std::string_view option) {
  const auto eq = kv.find('=');
  const char* end = kv.data() + kv.size();
  const char* first = eq == std::string::npos ? end : kv.data() + eq + 1;
  std::int64_t value = 0;
  const auto [ptr, ec] = std::from_chars(first, end, value);
  if (eq == std::string::npos || eq == 0 || first == end || ec != std::errc() || ptr != end)
    throw usage_error(std::string(option) + " '" + kv +
                      "' is not name=integer (a 64-bit integer, e.g. gather=0)");
  return {kv.substr(0, eq), value};
}

// --param name=value pins, each a parameter of some chosen strategy.
std::map<std::string, std::int64_t> parse_pins(
    const verify_options& o,
    const std::vector<std::pair<std::string, const par::kernel*>>& chosen) {
  std::map<std::string, std::int64_t> pinned;
  for (const std::string& kv : o.params) {
    const auto [name, value] = parse_param(kv, "--param");
    bool known = false;
    for (const auto& [n, s] : chosen)
      for (const auto& ps : s->info().params) known = known || ps.name == name;
    if (!known) throw usage_error("--param " + name + ": no chosen strategy has that parameter");
    if (!pinned.emplace(name, value).second) throw usage_error("--param " + name + " given twice");
  }
  return pinned;
}

// Every chosen strategy must take the pins: a worker count its pinned mesh factors divide, and
// values its validation accepts (checked on a small probe case).
void check_pins(const std::vector<std::pair<std::string, const par::kernel*>>& chosen,
                const std::map<std::string, std::int64_t>& pinned, int p, int ranks,
                std::int64_t limit) {
  for (const auto& [n, s] : chosen) {
    const par::kernel_info& info = s->info();
    par::run_case probe;
    probe.strategy = n;
    probe.prob.M = probe.prob.N = probe.prob.K = 1;
    probe.prob.type = info.dtypes.front();
    probe.prob.layout = info.layouts.front();
    probe.mode = info.modes.front();
    for (std::size_t l = 1; l < info.min_layers; ++l) probe.prob.hidden.push_back(1);
    // The product of the pinned mesh factors, each and all capped at max_parts + 1 (dp=65536
    // tp=65536 needs "more than 1048576" workers, never a wrapped int).
    const std::int64_t cap = std::int64_t{par::max_parts} + 1;
    std::int64_t step = 1;
    for (const auto& ps : info.params)
      if (const auto it = pinned.find(ps.name); it != pinned.end()) {
        probe.params[ps.name] = it->second;
        if (ps.divides_p) step = std::min(step * std::clamp<std::int64_t>(it->second, 1, cap), cap);
      }
    probe.p = p > 0 ? p : static_cast<int>(step);
    if (probe.p > ranks)
      throw usage_error(n + ": the pinned parameters need " +
                        (step == cap && p <= 0 ? "more than " + std::to_string(par::max_parts)
                                               : "p=" + std::to_string(probe.p)) +
                        " workers; only " + std::to_string(ranks) + " ranks were launched");
    try {
      par::complete_and_validate(*s, probe);
    } catch (const par::case_declined&) {
      continue;  // the pins hold (declining comes last); the generators draw what it takes
    }
    try {
      prop::check_footprint(*s, probe, limit);
    } catch (const error& e) {
      throw usage_error(std::string("--memory-limit is below the smallest case (M = N = K = 1): ") +
                        e.what());
    }
  }
}

// Leader: one replayed case's verdict printed; returns its failure record, if it failed.
std::optional<results::failure_record> print_case_verdict(const par::run_case& c,
                                                          const prop::case_verdict& v, int line,
                                                          unsigned mask,
                                                          const std::string& program) {
  std::printf("case: %s\n", c.to_string().c_str());
  if (v.failed == 0) {
    std::printf("PASS (%s; worst error %.2f·u·mag, peak %s / bound %s)\n",
                prop::properties_to_string(mask & ~v.not_claimed & ~v.not_measured).c_str(),
                v.worst_error, human_bytes(v.peak_bytes).c_str(),
                human_bytes(v.bound_bytes).c_str());
    std::fputs(error_rows(v.errors).c_str(), stdout);
    if (v.not_claimed != 0)
      std::printf("not claimed (never judged): %s\n",
                  prop::properties_to_string(v.not_claimed).c_str());
    if ((v.not_claimed & static_cast<unsigned>(prop::property::ledger)) != 0)
      std::printf("recorded: at most %s sent by one rank\n", human_bytes(v.recorded_sent).c_str());
    if (v.mpi_peak_bytes > 0)
      std::printf(
          "MPI's own heap inside the kernel's calls: at most %s on one rank (not in the "
          "peak)\n",
          human_bytes(v.mpi_peak_bytes).c_str());
    if (v.not_measured != 0)
      std::printf("not measured (never judged): %s\n",
                  prop::properties_to_string(v.not_measured).c_str());
    return std::nullopt;
  }
  results::failure_record f = record_of("replay", line, v, &c, program, mask);
  std::fputs(failure_text(c.strategy, f).c_str(), stdout);
  return f;
}

using chosen_list = std::vector<std::pair<std::string, const par::kernel*>>;

// One case to replay, for one strategy: from a corpus or replay file (its line) or --replay
// (line 0).
struct planned_case {
  par::run_case c;
  int line = 0;
};

struct replay_plan {
  std::vector<planned_case> cases;   // in file order
  std::vector<std::string> skipped;  // e.g. "corpus.txt:4: needs p=4 workers; 2 ranks launched"
  std::set<std::string> known;       // every line as written and as completed, for --corpus
};

// A corpus line runs on every kernel under test it names (a mutant cell's line also on its
// kernel: corpus::base_kernel); a replay-file line runs on the strategy it names. A line without
// strategy= runs on every kernel under test that takes the case. Malformed lines, and cases a
// named kernel rejects, are bad usage; a case needing more workers than launched is skipped.
replay_plan plan_replays(const catalogue& cat, const std::vector<corpus::line>& lines,
                         const std::string& where, const chosen_list& chosen, bool corpus_mode,
                         int ranks, std::int64_t limit) {
  replay_plan plan;
  for (const corpus::line& l : lines) {
    const std::string at = where + ":" + std::to_string(l.number);
    plan.known.insert(l.text);
    const bool named = corpus::names_strategy(l.text);
    par::run_case parsed;
    try {
      parsed = par::run_case::parse(named ? l.text : "strategy=? " + l.text);
    } catch (const error& e) {
      throw usage_error(at + ": " + e.what());
    }
    std::vector<std::string> targets;
    if (named && !corpus_mode) targets.push_back(parsed.strategy);
    for (const auto& [n, k] : chosen)
      if (!named || (corpus_mode && corpus::base_kernel(parsed.strategy) == n) ||
          (corpus_mode && parsed.strategy == n))
        targets.push_back(n);
    bool taken = false;
    for (const std::string& t : targets) {
      par::run_case c = parsed;
      c.strategy = t;
      try {
        par::complete_and_validate(cat.need(t), c);
      } catch (const par::case_declined& e) {
        // A replay-file line names what it runs: refused. A corpus line is skipped.
        if (named && !corpus_mode) throw usage_error(at + ": " + e.what());
        plan.skipped.push_back(at + ": " + e.what());
        taken = true;
        continue;
      } catch (const error& e) {
        if (named) throw usage_error(at + ": " + e.what());
        continue;  // a case this kernel does not take
      }
      taken = true;
      plan.known.insert(c.to_string());
      if (c.p > ranks) {
        plan.skipped.push_back(at + ": " + t + " needs p=" + std::to_string(c.p) + " workers; " +
                               std::to_string(ranks) + " ranks launched");
        continue;
      }
      try {
        prop::check_footprint(cat.need(t), c, limit);
      } catch (const error& e) {
        plan.skipped.push_back(at + ": " + e.what());
        continue;
      }
      plan.cases.push_back({std::move(c), l.number});
    }
    if (!taken)
      plan.skipped.push_back(at + (named ? ": " + parsed.strategy + " is not under test"
                                         : ": no kernel under test takes this case"));
  }
  return plan;
}

results::run_results new_run(const verify_options& o, unsigned mask, int ranks,
                             const std::string& program) {
  results::run_results r;
  r.program = program;
  r.ranks = ranks;
  r.cases_per_strategy = o.replay.empty() && o.replay_file.empty() ? o.cases : 0;
  r.seed = o.seed;
  r.mask = mask;
  r.corpus = o.corpus;
  return r;
}

void write_results(const verify_options& o, const results::run_results& r) {
  if (!o.junit.empty()) results::write_atomically(o.junit, results::junit_xml(r));
  if (!o.json.empty()) results::write_atomically(o.json, results::json_text(r));
}

// Leader: the results files rewritten; false (the error printed) if they could not be.
bool try_write_results(const verify_options& o, const results::run_results& r) {
  try {
    write_results(o, r);
    return true;
  } catch (const error& e) {
    std::fprintf(stderr, "shardcheck: %s\n", e.what());
    return false;
  }
}

// Leader: while `name` runs (its results so far in `pending`, if not yet in rr), a kernel's
// MPI_Abort on this rank writes the results files with the running case as aborted (last_words).
void write_on_abort(const verify_options& o, const results::run_results& rr, std::string name,
                    const results::strategy_result* pending) {
  prop::last_words::on_abort([&o, &rr, name = std::move(name), pending](const std::string& what,
                                                                        const std::string& replay) {
    results::run_results copy = rr;
    if (pending != nullptr) copy.strategies.push_back(*pending);
    auto it = std::find_if(copy.strategies.begin(), copy.strategies.end(),
                           [&](const results::strategy_result& r) { return r.name == name; });
    if (it == copy.strategies.end()) {
      copy.strategies.emplace_back().name = name;
      it = std::prev(copy.strategies.end());
    }
    results::failure_record f;
    f.source = "aborted";
    f.failed = static_cast<unsigned>(prop::property::runs);
    f.message = "runs: " + what;
    f.replay = replay;
    const std::string::size_type at = replay.find("--replay '");
    if (at != std::string::npos) {
      const std::string::size_type from = at + 10, to = replay.find('\'', from);
      f.case_line = replay.substr(from, to == std::string::npos ? to : to - from);
    }
    it->failures.push_back(std::move(f));
    write_results(o, copy);
  });
}

// Leader: every planned case, its verdict printed. Returns the exit status.
int run_replays(prop::driver& d, const replay_plan& plan, const verify_options& o, unsigned mask,
                const std::string& program) {
  using clock = std::chrono::steady_clock;
  warn_if_unmeasured(mask);
  results::run_results rr = new_run(o, mask, d.ranks(), program);
  bool written = true;
  int status = 0, failed = 0;
  std::size_t done = 0;
  for (const planned_case& pc : plan.cases) {
    const auto start = clock::now();
    write_on_abort(o, rr, pc.c.strategy, nullptr);
    const prop::case_verdict v = d.run(pc.c, mask);
    auto it =
        std::find_if(rr.strategies.begin(), rr.strategies.end(),
                     [&](const results::strategy_result& r) { return r.name == pc.c.strategy; });
    if (it == rr.strategies.end()) {
      rr.strategies.emplace_back().name = pc.c.strategy;
      it = std::prev(rr.strategies.end());
    }
    it->add(v);
    it->seconds += std::chrono::duration<double>(clock::now() - start).count();
    ++done;
    prop::last_words::finished(std::to_string(done) + " of " + std::to_string(plan.cases.size()) +
                               " cases finished (their verdicts are above)\n");
    if (auto f = print_case_verdict(pc.c, v, pc.line, mask, program)) {
      it->failures.push_back(std::move(*f));
      status = 1;
      ++failed;
    }
    written = try_write_results(o, rr) && written;
  }
  prop::last_words::on_abort({});
  d.stop();
  rr.complete = true;
  written = try_write_results(o, rr) && written;
  for (const std::string& why : plan.skipped) std::printf("skipped %s\n", why.c_str());
  if (!o.replay_file.empty())
    std::printf("%zu passed, %d failed\n", plan.cases.size() - static_cast<std::size_t>(failed),
                failed);
  return written ? status : 2;
}

// Leader: for every chosen strategy the corpus cases that apply to it, then RapidCheck; then the
// table. New shrunk failures are appended to the corpus. Returns the exit status.
int run_suite(prop::driver& d, const catalogue& cat, const chosen_list& chosen,
              const prop::suite_options& so, const std::string& program, const verify_options& o,
              replay_plan corpus_plan) {
  using clock = std::chrono::steady_clock;
  std::printf("shardcheck verify: %d ranks, %d cases per strategy, seed %llu, properties %s\n",
              d.ranks(), so.cases, static_cast<unsigned long long>(so.seed),
              prop::properties_to_string(so.mask).c_str());
  warn_if_unmeasured(so.mask);
  int status = 0;
  bool written = true;
  results::run_results rr = new_run(o, so.mask, d.ranks(), program);
  std::vector<std::string> appended;
  int replayed = 0, replay_failed = 0;
  for (const auto& [n, s] : chosen) {
    results::strategy_result res;
    res.name = n;
    write_on_abort(o, rr, n, &res);
    const prop::mutant_cell* cell = cat.cell(n);
    const std::int64_t fired = cell != nullptr ? cell->fire_count() : 0;
    const auto start = clock::now();
    for (const planned_case& pc : corpus_plan.cases) {
      if (pc.c.strategy != n) continue;
      const prop::case_verdict v = d.run(pc.c, so.mask);
      res.add(v);
      ++replayed;
      if (v.failed != 0) {
        res.failures.push_back(record_of("corpus", pc.line, v, &pc.c, program, so.mask));
        ++replay_failed;
      }
    }
    res.seconds = std::chrono::duration<double>(clock::now() - start).count();
    const prop::strategy_report r = d.check(n, *cat.find(n), so);
    res.cases = r.cases;
    res.seconds += r.seconds;
    res.worst_error = std::max(res.worst_error, r.worst_error);
    res.errors.merge(r.errors);
    res.recorded_sent = std::max(res.recorded_sent, r.recorded_sent);
    res.mpi_peak_bytes = std::max(res.mpi_peak_bytes, r.mpi_peak_bytes);
    if (r.worst_memory >= res.worst_memory) {
      res.worst_memory = r.worst_memory;
      res.peak_bytes = r.peak_bytes;
      res.bound_bytes = r.bound_bytes;
    }
    res.not_claimed |= r.not_claimed;
    res.not_measured |= r.not_measured;
    res.declined = r.declined;
    res.declined_example = r.declined_example;
    if (!r.passed) {
      std::optional<par::run_case> c;
      if (!r.replay.empty()) c = par::run_case::parse(r.replay);
      res.failures.push_back(
          record_of("generated", 0, r.failure, c ? &*c : nullptr, program, so.mask));
      if (!o.corpus.empty() && c && corpus_plan.known.insert(r.replay).second) {
        try {
          corpus::append(o.corpus, {r.replay});
          appended.push_back(r.replay);
        } catch (const error& e) {
          std::fprintf(stderr, "shardcheck: %s\n", e.what());
          written = false;
        }
      }
    }
    if (!res.passed()) status = prop::exit_code::failed;
    if (cell != nullptr && res.passed()) {
      res.survived = cell->fire_count() > fired ? "not caught" : "never acted";
      if (status == 0) status = prop::exit_code::not_caught;
    }
    rr.strategies.push_back(std::move(res));
    written = try_write_results(o, rr) && written;
    prop::last_words::finished(suite_table(rr) + failures_text(rr) +
                               std::to_string(rr.strategies.size()) + " of " +
                               std::to_string(chosen.size()) + " strategies finished\n");
  }
  prop::last_words::on_abort({});
  d.stop();
  rr.complete = true;
  written = try_write_results(o, rr) && written;
  std::fputs(suite_table(rr).c_str(), stdout);
  int passed = 0, survived = 0;
  for (const auto& res : rr.strategies) {
    passed += res.passed() && res.survived.empty() ? 1 : 0;
    survived += res.passed() && !res.survived.empty() ? 1 : 0;
  }
  if (!o.corpus.empty()) {
    std::printf("corpus %s: %d cases replayed, %d failed; %zu new failures appended\n",
                o.corpus.c_str(), replayed, replay_failed, appended.size());
    for (const std::string& why : corpus_plan.skipped) std::printf("  skipped %s\n", why.c_str());
  }
  std::fputs(failures_text(rr).c_str(), stdout);
  std::printf("%d passed, %zu failed", passed,
              rr.strategies.size() - static_cast<std::size_t>(passed + survived));
  if (survived > 0)
    std::printf(", %d mutants not caught (exit %d)", survived, prop::exit_code::not_caught);
  std::printf("\n");
  return written ? status : 2;
}

// The watchdog's limit: from 0.1 s (a case needs some time to start) to 10⁶ s (11.6 days), which
// any clock holds.
void check_case_timeout(double seconds) {
  if (!(seconds >= 0.1) || !std::isfinite(seconds) || seconds > 1e6)
    throw usage_error("--case-timeout must be a number of seconds in [0.1, 1000000]");
}

int lead_verify(prop::driver& d, const catalogue& cat, const chosen_list& chosen, replay_plan& plan,
                const verify_options& o, unsigned mask, std::optional<par::backend_spec> forced,
                const std::map<std::string, std::int64_t>& pinned, std::int64_t limit,
                const std::string& program);

// No two of the files a run writes (and the corpus it reads and extends) may be one file.
void check_distinct_files(const verify_options& o) {
  namespace fs = std::filesystem;
  std::vector<std::pair<std::string, fs::path>> seen;
  for (const auto& [option, path] :
       {std::pair{"--junit", &o.junit}, std::pair{"--json", &o.json},
        std::pair{"--corpus", &o.corpus}, std::pair{"--log-cases", &o.log_cases}}) {
    if (path->empty()) continue;
    std::error_code ec;
    const fs::path p = fs::weakly_canonical(fs::absolute(*path, ec), ec);
    for (const auto& [other, q] : seen)
      if (p == q)
        throw usage_error(std::string(option) + " and " + other + " name one file, " + *path);
    seen.emplace_back(option, p);
  }
}

int do_verify(const catalogue& cat, const verify_options& o, const std::string& program) {
  if (o.cases < 1) throw usage_error("--cases must be at least 1");
  check_distinct_files(o);
  check_case_timeout(o.case_timeout);
  const unsigned mask = prop::parse_properties(o.properties);
  std::optional<par::backend_spec> forced;
  if (!o.backend.empty()) forced = par::parse_backend_spec(o.backend);
  const auto chosen = chosen_strategies(cat, o, forced.has_value());
  par::comm world = par::comm::world();
  const std::int64_t limit = o.memory_limit_text.empty()
                                 ? prop::default_memory_limit_here()
                                 : prop::parse_bytes(o.memory_limit_text, "--memory-limit");
  par::run_case replay_case;
  if (!o.replay.empty()) {
    replay_case = par::run_case::parse(o.replay);
    const par::kernel& k = cat.need(replay_case.strategy);
    if (replay_case.p > world.size())
      throw usage_error("the case needs p=" + std::to_string(replay_case.p) + " workers; only " +
                        std::to_string(world.size()) + " ranks were launched (mpirun -n " +
                        std::to_string(replay_case.p) + ")");
    par::complete_and_validate(k, replay_case);
    prop::check_footprint(k, replay_case, limit);
    if (!o.dump.empty()) dump::check_dumpable(replay_case);
  }
  const std::map<std::string, std::int64_t> pinned = parse_pins(o, chosen);
  if (o.p < 0 || o.p > world.size())
    throw usage_error("--p " + std::to_string(o.p) + ": between 1 and the " +
                      std::to_string(world.size()) + " ranks launched");
  check_pins(chosen, pinned, o.p, world.size(), limit);
  // The leader reads the replay lines (stdin reaches rank 0 only) and tries the result files;
  // every rank learns whether that went well.
  replay_plan plan;
  std::string plan_error;
  if (world.rank() == 0) {
    try {
      if (!o.replay.empty()) plan.cases.push_back({replay_case, 0});
      if (!o.replay_file.empty())
        plan = plan_replays(cat, corpus::read_lines(o.replay_file, false),
                            o.replay_file == "-" ? "stdin" : o.replay_file, chosen, false,
                            world.size(), limit);
      if (!o.corpus.empty())
        plan = plan_replays(cat, corpus::read_lines(o.corpus, true), o.corpus, chosen, true,
                            world.size(), limit);
      write_results(o, new_run(o, mask, world.size(), program));
      for (const auto& [option, path] :
           {std::pair{"--log-cases", &o.log_cases}, std::pair{"--corpus", &o.corpus}}) {
        if (path->empty()) continue;
        std::FILE* f = std::fopen(path->c_str(), "a");
        if (f == nullptr)
          throw usage_error(std::string(option) + ": cannot open " + *path +
                            " for appending: " + std::strerror(errno));
        std::fclose(f);
      }
    } catch (const error& e) {
      plan_error = e.what();
    }
  }
  int bad = plan_error.empty() ? 0 : 1;
  MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (bad != 0) throw usage_error(plan_error);
  prop::driver d(
      world, [&](std::string_view n) { return cat.find(n); }, o.case_timeout, program);
  int status = 0;
  if (!d.leader()) {
    d.serve();
  } else {
    // The followers wait in serve(): an error here ends the job (exit 4) rather than leave them.
    try {
      if (!o.log_cases.empty()) d.log_cases(o.log_cases);
      status = lead_verify(d, cat, chosen, plan, o, mask, forced, pinned, limit, program);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "shardcheck: runtime error: %s\n", e.what());
      std::fflush(stdout);
      std::fflush(stderr);
      PMPI_Abort(MPI_COMM_WORLD, prop::exit_code::runtime);  // not a kernel's (pmpi.hpp)
    }
  }
  std::fflush(stdout);
  MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!o.dump.empty())
    dump::write_case(*cat.find(replay_case.strategy), replay_case, world, o.dump);
  return status;
}

int lead_verify(prop::driver& d, const catalogue& cat, const chosen_list& chosen, replay_plan& plan,
                const verify_options& o, unsigned mask, std::optional<par::backend_spec> forced,
                const std::map<std::string, std::int64_t>& pinned, std::int64_t limit,
                const std::string& program) {
  int status = 0;
  if (!o.replay.empty() || !o.replay_file.empty()) {
    status = run_replays(d, plan, o, mask, program);
  } else {
    prop::suite_options so;
    so.cases = o.cases;
    so.seed = o.seed;
    so.mask = mask;
    so.progress = !o.quiet;
    so.pins.backend = forced;
    if (o.p > 0) so.pins.p = o.p;
    so.pins.params = pinned;
    so.memory_limit = limit;
    status = run_suite(d, cat, chosen, so, program, o, std::move(plan));
  }
  return status;
}

int do_selftest(const catalogue& cat, const prop::selftest_options& o, double timeout,
                const std::string& program) {
  if (o.cases < 1) throw usage_error("--cases must be at least 1");
  check_case_timeout(timeout);
  par::comm world = par::comm::world();
  // The gate is judged at 4 ranks: with fewer, a cell whose defect needs more workers (a 2 × 2
  // mesh, a third stage) cannot fire, and its NOT CAUGHT would say nothing of the properties.
  constexpr int selftest_ranks = 4;
  if (world.size() < selftest_ranks)
    throw usage_error("selftest judges its cells at " + std::to_string(selftest_ranks) +
                      " ranks (mpirun -n " + std::to_string(selftest_ranks) + "); " +
                      std::to_string(world.size()) +
                      " launched, too few for the cells whose defects need more workers");
  prop::driver d(
      world, [&](std::string_view n) { return cat.find(n); }, timeout, program);
  int status = 0;
  if (!d.leader()) {
    d.serve();
  } else {
    status = prop::run_selftest(d, cat.mutants, o, program);
    d.stop();
  }
  std::fflush(stdout);
  MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return status;
}

}  // namespace

int cli_main(int argc, char** argv, par::registry extra) {
  catalogue cat(std::move(extra));
  const std::string program = argc > 0 ? argv[0] : "shardcheck";

  CLI::App app{
      "shardcheck: proves that parallel GEMM strategies compute what one device "
      "computes, with the memory and communication they claim."};
  app.require_subcommand(1);
  app.footer(
      "Exit codes: 0 every property held, 1 a property failed, 2 bad usage, 3 the watchdog ended "
      "a hung case, 4 an MPI or runtime error, 5 a rank crashed, 6 a kernel or its library called "
      "MPI_Abort, 129/130/143 hung up/interrupted/terminated.");
  auto* list = app.add_subcommand("list", "List the strategies with their placements");

  verify_options vo;
  auto* verify = app.add_subcommand(
      "verify", "Run the properties on generated cases (under mpirun; rank 0 drives)");
  // A seed is 0 … 2⁶⁴−1 written in digits: "-1" would otherwise wrap to 2⁶⁴−1.
  const CLI::Validator unsigned_integer(
      [](const std::string& v) {
        std::uint64_t n = 0;
        const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
        return v.empty() || ec != std::errc() || end != v.data() + v.size()
                   ? std::string("must be an integer from 0 to 18446744073709551615")
                   : std::string();
      },
      "UINT");
  // A text option must not be given empty: `--replay ''` would otherwise run the whole suite.
  const CLI::Validator not_empty(
      [](const std::string& v) { return v.empty() ? std::string("must not be empty") : ""; },
      "TEXT");
  auto* strategy_opt = verify->add_option("--strategy", vo.strategies,
                                          "Strategy to verify (repeatable; default: all)");
  auto* cases_opt =
      verify->add_option("--cases", vo.cases, "Cases per strategy")->capture_default_str();
  auto* seed_opt = verify->add_option("--seed", vo.seed, "RapidCheck seed")
                       ->capture_default_str()
                       ->check(unsigned_integer);
  auto* replay_opt =
      verify->add_option("--replay", vo.replay, "Run exactly one case, given by its replay line");
  auto* replay_file_opt =
      verify->add_option("--replay-file", vo.replay_file,
                         "Run the cases of a file of replay lines, one a line ('-': stdin); a line "
                         "without strategy= runs on every kernel under test that takes it");
  auto* corpus_opt = verify->add_option(
      "--corpus", vo.corpus,
      "Regression corpus: replay its lines on the kernels under test first, then "
      "append every new shrunk failure");
  replay_opt->excludes(replay_file_opt)->excludes(corpus_opt);
  replay_file_opt->excludes(corpus_opt);
  verify->add_option("--junit", vo.junit,
                     "Write JUnit XML results to this file (rewritten as each strategy finishes)");
  verify->add_option("--json", vo.json,
                     "Write JSON results to this file (rewritten as each strategy finishes)");
  verify
      ->add_option("--property", vo.properties,
                   "Properties to check: all, or a list of forward,backward,ledger,memory,"
                   "determinism,replicas")
      ->capture_default_str();
  verify
      ->add_option("--case-timeout", vo.case_timeout,
                   "Seconds before the watchdog ends a hung case")
      ->capture_default_str();
  verify->add_flag("--quiet", vo.quiet, "No progress lines");
  auto* p_opt = verify->add_option("--p", vo.p,
                                   "Run every case on exactly this many workers (default: drawn)");
  auto* param_opt = verify->add_option(
      "--param", vo.params, "Pin a strategy parameter in every case, e.g. dp=2 (repeatable)");
  verify->add_option("--memory-limit", vo.memory_limit_text,
                     "Refuse a case whose footprint on a rank is above this many bytes, e.g. "
                     "2GiB, 512M, 1000000 (default: 3/4 of the machine's memory shared by the "
                     "ranks on it)");
  verify->add_option("--log-cases", vo.log_cases,
                     "Append every case line to this file before the case runs (replays with "
                     "--replay-file)");
  auto* backend_opt = verify->add_option("--backend", vo.backend,
                                         "Run every case's collectives on this backend: mpi or "
                                         "native, native:all_reduce=tree for the tree all-reduce "
                                         "(default: drawn per case)");
  // A replay line is the whole case: what would change it, or pick cases, is refused beside it
  // rather than ignored. A replay file's lines pick their kernels from --strategy.
  for (CLI::Option* o : {cases_opt, seed_opt, p_opt, param_opt, backend_opt}) {
    replay_opt->excludes(o);
    replay_file_opt->excludes(o);
  }
  replay_opt->excludes(strategy_opt);
  verify
      ->add_option("--dump", vo.dump,
                   "With --replay: write the case's inputs and outputs (parallel, reference, "
                   "oracle) and magnitude products as .npy files into this directory")
      ->needs(replay_opt);

  std::string ex_acc, ex_reduce;  // empty: f32 (a 16-bit case's default policy)
  std::string ex_name, ex_dtype = "f64", ex_layout = "out_in", ex_backend = "mpi", ex_hidden,
                       ex_act = "identity";
  int ex_p = 1;
  std::int64_t ex_m = 0, ex_n = 0, ex_k = 0;
  std::vector<std::string> ex_parts, ex_params;
  bool ex_json = false;
  auto* explain = app.add_subcommand(
      "explain", "Show a strategy's layouts, collectives per phase and memory bound");
  explain->add_option("--strategy", ex_name, "Strategy")->required();
  explain->add_option("-p", ex_p, "Workers")->required();
  explain->add_option("--M", ex_m, "Rows of X (batch)")->required();
  explain->add_option("--N", ex_n, "Output features")->required();
  explain->add_option("--K", ex_k, "Input features")->required();
  explain->add_option("--dtype", ex_dtype, "f32, f64, bf16 or f16 (16-bit: acc=f32 reduce=f32)")
      ->capture_default_str();
  explain->add_option("--acc", ex_acc, "bf16/f16: the dtype local sums are in (f32 or the dtype)");
  explain->add_option(
      "--reduce", ex_reduce,
      "bf16/f16: the dtype partial sums travel and are added in (f32 or the dtype)");
  explain->add_option("--layout", ex_layout, "out_in or in_out")->capture_default_str();
  explain
      ->add_option("--backend", ex_backend,
                   "mpi or native: whose byte counts and reduction "
                   "depths")
      ->capture_default_str();
  explain->add_option("--H", ex_hidden, "Hidden widths of a stack, e.g. 6 or 6,4");
  explain->add_option("--act", ex_act, "Activation of a stack: identity or relu")
      ->capture_default_str();
  explain->add_option("--part", ex_parts, "A partition, e.g. M=3,0,4 (default balanced)");
  explain->add_option("--param", ex_params, "A strategy parameter, e.g. gather=0");
  explain->add_flag("--json", ex_json, "JSON output");
  std::vector<int> ex_ranks;
  explain->add_option("--rank", ex_ranks,
                      "Show only these ranks (repeatable; default: every rank up to 64, else "
                      "ranks 0, 1 and the last)");
  bool ex_record = false;
  std::string ex_beside;
  explain->add_option("--beside", ex_beside,
                      "With --record: record this strategy too, on the same shape, workers and "
                      "parameters (those it has), and show its traffic beside, rank by rank");
  explain->add_flag("--record", ex_record,
                    "Run the case once on p ranks (under mpirun) and show what each rank recorded");

  prop::selftest_options st;
  double st_timeout = 120;
  auto* selftest = app.add_subcommand(
      "selftest", "Run the properties against every mutant; exit 0 only if all are caught");
  selftest->add_option("--cases", st.cases, "Cases per mutant at most")->capture_default_str();
  selftest->add_option("--seed", st.seed, "RapidCheck seed")
      ->capture_default_str()
      ->check(unsigned_integer);
  selftest->add_option("--case-timeout", st_timeout, "Watchdog seconds")->capture_default_str();

  compare::options co;
  auto* compare_cmd = compare::add_subcommand(app, co);
  audit::options ao;
  auto* audit_cmd = audit::add_subcommand(app, ao);
  scale::options so;
  auto* scale_cmd = scale::add_subcommand(app, so);

  // No option takes an empty value: `--p ''` or `--backend ''` would otherwise be read as the
  // default, silently.
  for (CLI::App* sub : {verify, explain, selftest, compare_cmd, audit_cmd, scale_cmd})
    for (CLI::Option* o : sub->get_options())
      if (o->get_type_size() != 0) o->check(not_empty);
  p_opt->check(CLI::Range(1, par::max_parts));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Under mpirun every rank parses the same arguments: one message, from rank 0 (Open MPI
    // names the rank in OMPI_COMM_WORLD_RANK, MPICH's hydra in PMI_RANK).
    const char* r = std::getenv("OMPI_COMM_WORLD_RANK");
    if (r == nullptr) r = std::getenv("PMI_RANK");
    if (r != nullptr && std::string(r) != "0")
      return e.get_exit_code() == 0 ? prop::exit_code::pass : prop::exit_code::usage;
    const int code = app.exit(e);
    return code == 0 ? prop::exit_code::pass : prop::exit_code::usage;
  }

  if (verify->parsed()) {
    try {
      corpus::check_length(vo.replay, "--replay");
    } catch (const error& e) {
      std::fprintf(stderr, "shardcheck: %s\n", e.what());
      return prop::exit_code::usage;
    }
  }
  const bool needs_mpi = verify->parsed() || selftest->parsed() ||
                         (explain->parsed() && ex_record) || compare_cmd->parsed() ||
                         audit_cmd->parsed() || scale_cmd->parsed();
  std::unique_ptr<par::environment> env;
  // The extra kernels' process_hooks: `finalize` runs when this is destroyed, before env.
  struct hooks_scope {
    std::function<void()> finalize;
    hooks_scope() = default;
    hooks_scope(const hooks_scope&) = delete;
    hooks_scope& operator=(const hooks_scope&) = delete;
    ~hooks_scope() {
      if (!finalize) return;
      try {
        finalize();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "shardcheck: the finalize hook failed: %s\n", e.what());
      }
    }
  } hooks;
  int rank = 0;
  // Every error ends with its exit code (README, "Exit codes"); none escapes as an exception.
  // A usage error is found alike on every rank, which all return; a runtime error may be one
  // rank's alone, so it ends the job (MPI_Abort) rather than wait in MPI_Finalize for the others.
  const auto fail = [&](int code, const char* kind, const char* what) {
    if (rank == 0 || code != prop::exit_code::usage)
      std::fprintf(stderr, "shardcheck: %s%s\n", kind, what);
    int size = 1;
    if (env != nullptr && code != prop::exit_code::usage) {
      MPI_Comm_size(MPI_COMM_WORLD, &size);
      std::fflush(stderr);
      if (size > 1) PMPI_Abort(MPI_COMM_WORLD, code);  // not a kernel's (pmpi.hpp)
    }
    return code;
  };
  // The command's code, once its output is final (last_words::complete).
  const auto done = [](int code) {
    prop::last_words::complete(code);
    return code;
  };
  try {
    if (needs_mpi) {
      env = std::make_unique<par::environment>(argc, argv);
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      const par::process_hooks& h = cat.extra.hooks();
      if (h.init) h.init(argc, argv);
      hooks.finalize = h.finalize;
    }
    if (list->parsed()) return do_list(cat);
    if (explain->parsed()) {
      par::run_case c = default_case(cat.need(ex_name), ex_p, ex_m, ex_n, ex_k);
      c.prob.type = parse_dtype(ex_dtype);
      // --acc, --reduce: a 16-bit case's precision policy, as acc= reduce= on a replay line.
      if (!ex_acc.empty() || !ex_reduce.empty()) {
        if (!is_storage16(c.prob.type))
          throw usage_error("--acc and --reduce are only for --dtype bf16 or f16, not " + ex_dtype);
        if (!ex_acc.empty()) c.policy.acc = parse_dtype(ex_acc);
        if (!ex_reduce.empty()) c.policy.reduce = parse_dtype(ex_reduce);
        validate_policy(c.prob.type, c.policy);
      }
      c.prob.layout = parse_weight_layout(ex_layout);
      c.backend = par::parse_backend_spec(ex_backend);
      if (!ex_hidden.empty()) c.prob.hidden = par::partition::parse(ex_hidden).sizes();
      c.prob.act = parse_activation(ex_act);
      for (const auto& kv : ex_parts) {
        const auto eq = kv.find('=');
        if (eq == std::string::npos)
          throw usage_error("--part expects DIM=sizes, got '" + kv + "'");
        if (!c.parts.emplace(kv.substr(0, eq), par::partition::parse(kv.substr(eq + 1))).second)
          throw usage_error("--part " + kv.substr(0, eq) + " given twice");
      }
      for (const auto& kv : ex_params) {
        const auto [name, value] = parse_param(kv, "--param");
        if (!c.params.emplace(name, value).second)
          throw usage_error("--param " + name + " given twice");
      }
      return done(do_explain(cat, ex_name, c, ex_json, ex_ranks, ex_record, ex_beside));
    }
    if (verify->parsed()) return done(do_verify(cat, vo, program));
    if (selftest->parsed()) return done(do_selftest(cat, st, st_timeout, program));
    if (compare_cmd->parsed())
      return done(compare::run(
          cat.strategies(), [&](std::string_view n) { return cat.find(n); }, co));
    if (audit_cmd->parsed())
      return done(audit::run(
          cat.strategies(), [&](std::string_view n) { return cat.find(n); }, ao));
    if (scale_cmd->parsed())
      return done(scale::run(
          cat.strategies(), [&](std::string_view n) { return cat.find(n); }, so));
  } catch (const mpi_error& e) {
    return fail(prop::exit_code::runtime, "MPI error: ", e.what());
  } catch (const shardcheck::error& e) {
    return fail(prop::exit_code::usage, "", e.what());
  } catch (const std::bad_alloc& e) {
    return fail(prop::exit_code::runtime, "out of memory: ", e.what());
  } catch (const std::exception& e) {
    return fail(prop::exit_code::runtime, "runtime error: ", e.what());
  }
  return prop::exit_code::usage;
}

}  // namespace shardcheck
