#include "audit.hpp"

#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "plotting.hpp"
#include "runner.hpp"
#include "shardcheck/parallel/plan.hpp"
#include "shardcheck/properties/driver.hpp"
#include "shardcheck/properties/exit_codes.hpp"
#include "shardcheck/properties/footprint.hpp"
#include "shardcheck/properties/verdict.hpp"
#include "shardcheck/reference/bound.hpp"
#include "shardcheck/reference/mixed.hpp"
#include "values.hpp"

namespace shardcheck::audit {

namespace {

using json = nlohmann::ordered_json;

struct usage_error : error {
  using error::error;
};

// The slack of the growth rule: a max or mean over the elements of one case fluctuates by about
// a factor 2 from one size to the next, and a factor 2 at both ends of a series spanning
// x_min … x_max moves its fitted slope by 2·ln 2 / ln(x_max/x_min): 0.17 over K = 16 … 65536,
// 1.0 over p = 1 … 4. An exponent more than that (and at least 0.25) above the one it is held to
// is a real difference in growth, not noise.
constexpr double growth_slack = 0.25;
[[nodiscard]] double slack_over(const std::vector<std::pair<double, double>>& xy) {
  double lo = INFINITY, hi = 0;
  for (const auto& [x, y] : xy)
    if (y > 0 && std::isfinite(y)) {
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
  if (!(hi > lo)) return INFINITY;
  return std::max(growth_slack, 2 * std::log(2.0) / std::log(hi / lo));
}
// The statistical tier's false-alarm probability per tensor and case: verify's
// (ref::statistical_p_fail, bound.hpp).
constexpr double false_alarm_target = ref::statistical_p_fail;

// --- the Open MPI algorithm settings in force -------------------------------------------------

// Every coll_tuned control variable MPI_T exposes, with its value: the algorithms the tuned
// component runs (0: its own decision), e.g. {"coll_tuned_allreduce_algorithm": 0, …}.
json mpi_t_coll_settings() {
  json out = json::object();
  int provided = 0;
  if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return out;
  int num = 0;
  if (MPI_T_cvar_get_num(&num) == MPI_SUCCESS) {
    for (int i = 0; i < num; ++i) {
      char name[256], desc[8];
      int name_len = sizeof name, desc_len = sizeof desc, verbosity = 0, bind = 0, scope = 0;
      MPI_Datatype type = MPI_DATATYPE_NULL;
      MPI_T_enum enumtype = MPI_T_ENUM_NULL;
      if (MPI_T_cvar_get_info(i, name, &name_len, &verbosity, &type, &enumtype, desc, &desc_len,
                              &bind, &scope) != MPI_SUCCESS)
        continue;
      const std::string n(name);
      if (n.rfind("coll_tuned_", 0) != 0 || bind != MPI_T_BIND_NO_OBJECT) continue;
      MPI_T_cvar_handle handle = MPI_T_CVAR_HANDLE_NULL;
      int count = 0;
      if (MPI_T_cvar_handle_alloc(i, nullptr, &handle, &count) != MPI_SUCCESS) continue;
      if (count == 1 && (type == MPI_INT || type == MPI_UNSIGNED)) {
        int v = 0;
        if (MPI_T_cvar_read(handle, &v) == MPI_SUCCESS) out[n] = v;
      } else if (count == 1 && (type == MPI_LONG_LONG || type == MPI_UNSIGNED_LONG_LONG ||
                                type == MPI_LONG || type == MPI_UNSIGNED_LONG)) {
        long long v = 0;
        if (MPI_T_cvar_read(handle, &v) == MPI_SUCCESS) out[n] = v;
      } else if (count == 1 && type == MPI_C_BOOL) {
        unsigned char v[16] = {};  // a bool, in however many bytes the library stores it
        if (MPI_T_cvar_read(handle, v) == MPI_SUCCESS)
          out[n] = std::any_of(std::begin(v), std::end(v), [](unsigned char b) { return b != 0; });
      } else if (type == MPI_CHAR && count > 0 && count < 4096) {
        std::string v(static_cast<std::size_t>(count) + 1, '\0');
        if (MPI_T_cvar_read(handle, v.data()) == MPI_SUCCESS) out[n] = std::string(v.c_str());
      }
      MPI_T_cvar_handle_free(&handle);
    }
  }
  MPI_T_finalize();
  return out;
}

json open_mpi_settings() {
  json env = json::object();
  for (const auto& [k, v] : prop::collective_mca_settings()) env[k] = v;
  return {{"environment", env}, {"mpi_t_control_variables", mpi_t_coll_settings()}};
}

// --- the measurements -------------------------------------------------------------------------

// Max and mean of |got − oracle| / (u·mag) over one tensor's elements with mag > 0; elements of
// mag 0 (a zero row) count only when got differs from the oracle (then the max is infinite).
struct error_stats {
  double max = 0, mean = 0;
  std::int64_t nonfinite = 0, counted = 0;
};

template <class V>
error_stats measure(const V& got, const std::vector<double>& oracle, const std::vector<double>& mag,
                    double u) {
  error_stats s;
  double sum = 0;
  for (std::size_t i = 0; i < oracle.size(); ++i) {
    const double g = static_cast<double>(got[i]);
    if (!std::isfinite(g)) {
      ++s.nonfinite;
      continue;
    }
    const double err = std::abs(g - oracle[i]);
    if (mag[i] > 0) {
      const double e = err / (u * mag[i]);
      s.max = std::max(s.max, e);
      sum += e;
      ++s.counted;
    } else if (err > 0) {
      s.max = INFINITY;
    }
  }
  s.mean = s.counted > 0 ? sum / static_cast<double>(s.counted) : 0;
  return s;
}

// The share of each tier's bound one computation used, against the oracle (verdict.hpp).
using shares = prop::oracle_shares;

// "f32", or for a 16-bit case its policy: "bf16/f32/bf16" (storage / acc / reduce).
std::string type_label(dtype t, const precision& p) {
  std::string out(to_string(t));
  if (is_storage16(t))
    out += "/" + std::string(to_string(p.acc)) + "/" + std::string(to_string(p.reduce));
  return out;
}

struct cell {
  std::string strategy, tensor, backend, replay;
  dtype type = dtype::f64;
  precision policy{};  // bf16 and f16 only
  std::int64_t M = 0, N = 0, K = 0;
  int p = 1;
  std::int64_t k_par = 0, k_reduced = 0, k_ref = 0, elements = 0, missing = 0, conflicts = 0;
  error_stats par, ref;
  shares par_share, ref_share;
  bool chains_claimed = true;
};

// Least squares slope of log y against log x over the points with y > 0 (finite); NaN with
// fewer than 2 distinct x (3 asked for by the caller where noise matters).
struct fit {
  double slope = NAN;
  int points = 0;
};

fit log_log(const std::vector<std::pair<double, double>>& xy, int min_points) {
  std::vector<std::pair<double, double>> pts;
  for (const auto& [x, y] : xy)
    if (x > 0 && y > 0 && std::isfinite(y)) pts.emplace_back(std::log(x), std::log(y));
  fit f;
  f.points = static_cast<int>(pts.size());
  if (f.points < min_points) return f;
  double mx = 0, my = 0;
  for (const auto& [x, y] : pts) {
    mx += x;
    my += y;
  }
  mx /= f.points;
  my /= f.points;
  double sxx = 0, sxy = 0;
  for (const auto& [x, y] : pts) {
    sxx += (x - mx) * (x - mx);
    sxy += (x - mx) * (y - my);
  }
  if (sxx <= 0) return f;
  f.slope = sxy / sxx;
  return f;
}

json num(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

// "0.25" or "-" for a missing fit.
std::string fmt(double v, const char* f = "%.2f") {
  if (!std::isfinite(v)) return v > 0 ? "inf" : "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// Whether k runs micro-batches through stages (its mesh is dp × pp × tp; it takes m).
bool is_pipeline(const par::kernel& k) {
  for (const auto& ps : k.info().params)
    if (ps.name == "m") return true;
  return false;
}

struct subject_entry {
  std::string name;
  const prop::subject* s = nullptr;
};

// One group's summary: per strategy, tensor and dtype.
struct group_summary {
  std::string strategy, tensor, label;  // label: type_label
  dtype type = dtype::f64;
  double max_u = 0, mean_u = 0, rig = 0, stat = 0;
  double ref_max_u = 0, ref_mean_u = 0;
  // the exponents against K of the worst series (over backend and p), its chain's and the
  // reference's; against p at the largest K
  double alpha_k_max = NAN, alpha_k_mean = NAN, alpha_chain_k = NAN, alpha_ref_max = NAN,
         alpha_ref_mean = NAN;
  double alpha_p_max = NAN, alpha_p_mean = NAN, alpha_chain_p = NAN;
  std::vector<std::string> flags;
  json series = json::array();
};

std::string flags_text(const std::vector<std::string>& f) {
  std::string out;
  for (const auto& s : f) out += (out.empty() ? "" : "; ") + s;
  return out;
}

std::vector<group_summary> summarize(const std::vector<cell>& cells) {
  std::map<std::tuple<std::string, std::string, std::string>, group_summary> groups;
  std::vector<std::tuple<std::string, std::string, std::string>> order;
  // The reference's exponent against K per (tensor, dtype), from one strategy's cells (they are
  // the same reference).
  std::map<std::pair<std::string, int>, std::map<std::int64_t, std::pair<double, double>>> ref_pts;
  for (const cell& c : cells) {
    const auto key = std::make_tuple(c.strategy, c.tensor, type_label(c.type, c.policy));
    auto [it, fresh] = groups.try_emplace(key);
    if (fresh) {
      order.push_back(key);
      it->second.strategy = c.strategy;
      it->second.tensor = c.tensor;
      it->second.label = std::get<2>(key);
      it->second.type = c.type;
    }
    group_summary& g = it->second;
    g.max_u = std::max(g.max_u, c.par.max);
    g.mean_u = std::max(g.mean_u, c.par.mean);
    g.rig = std::max(g.rig, c.par_share.rigorous);
    g.stat = std::max(g.stat, c.par_share.statistical);
    g.ref_max_u = std::max(g.ref_max_u, c.ref.max);
    g.ref_mean_u = std::max(g.ref_mean_u, c.ref.mean);
    ref_pts[{c.tensor, static_cast<int>(c.type)}][c.K] = {c.ref.max, c.ref.mean};
  }
  std::vector<group_summary> out;
  for (const auto& key : order) {
    group_summary g = groups[key];
    const auto& rp = ref_pts[{g.tensor, static_cast<int>(g.type)}];
    std::vector<std::pair<double, double>> rmax, rmean;
    for (const auto& [k, v] : rp) {
      rmax.emplace_back(static_cast<double>(k), v.first);
      rmean.emplace_back(static_cast<double>(k), v.second);
    }
    g.alpha_ref_max = log_log(rmax, 3).slope;
    g.alpha_ref_mean = log_log(rmean, 3).slope;
    // Series over K: one per (backend, p); over p: one per (backend, K).
    std::map<std::pair<std::string, int>, std::vector<const cell*>> by_k;
    std::map<std::pair<std::string, std::int64_t>, std::vector<const cell*>> by_p;
    bool incomplete = false, unclaimed = false;
    for (const cell& c : cells) {
      if (c.strategy != g.strategy || c.tensor != g.tensor ||
          type_label(c.type, c.policy) != g.label)
        continue;
      by_k[{c.backend, c.p}].push_back(&c);
      by_p[{c.backend, c.K}].push_back(&c);
      incomplete = incomplete || c.missing > 0 || c.par.nonfinite > 0 || c.conflicts > 0;
      unclaimed = unclaimed || !c.chains_claimed;
    }
    if (g.rig > 1) g.flags.push_back("outside the rigorous bound (" + fmt(g.rig) + "x)");
    if (g.stat > 1) g.flags.push_back("outside the statistical bound (" + fmt(g.stat) + "x)");
    if (incomplete) g.flags.push_back("missing, non-finite or differing replica values");
    if (unclaimed) g.flags.push_back("claims no chains: no bound to judge by");
    bool faster_ref = false, faster_chain_k = false, faster_chain_p = false;
    for (const auto& [key2, list] : by_k) {
      std::vector<std::pair<double, double>> mx, mn, ch;
      for (const cell* c : list) {
        mx.emplace_back(static_cast<double>(c->K), c->par.max);
        mn.emplace_back(static_cast<double>(c->K), c->par.mean);
        ch.emplace_back(static_cast<double>(c->K), static_cast<double>(c->k_par));
      }
      const double a_max = log_log(mx, 3).slope, a_mean = log_log(mn, 3).slope,
                   a_chain = log_log(ch, 3).slope;
      g.series.push_back({{"over", "K"},
                          {"backend", key2.first},
                          {"p", key2.second},
                          {"alpha_max", num(a_max)},
                          {"alpha_mean", num(a_mean)},
                          {"alpha_chain", num(a_chain)}});
      const auto worse = [](double a, double b) {
        return std::isfinite(a) && (!std::isfinite(b) || a > b);
      };
      if (worse(a_max, g.alpha_k_max)) g.alpha_k_max = a_max;
      if (worse(a_mean, g.alpha_k_mean)) g.alpha_k_mean = a_mean;
      if (worse(a_chain, g.alpha_chain_k)) g.alpha_chain_k = a_chain;
      // A chain that does not grow allows no growth; one that shrinks demands no shrinking (the
      // error may sit far below its bound).
      const double slack = slack_over(mn);
      g.series.back()["slack"] = num(slack);
      for (const auto& [a, r] : {std::pair{a_max, g.alpha_ref_max}, {a_mean, g.alpha_ref_mean}}) {
        if (std::isfinite(a) && std::isfinite(r) && a > r + slack) faster_ref = true;
        if (std::isfinite(a) && std::isfinite(a_chain) && a > std::max(a_chain, 0.0) + slack)
          faster_chain_k = true;
      }
    }
    std::int64_t k_top = 0;
    for (const auto& [key2, list] : by_p) k_top = std::max(k_top, key2.second);
    for (const auto& [key2, list] : by_p) {
      std::vector<std::pair<double, double>> mx, mn, ch;
      for (const cell* c : list) {
        mx.emplace_back(static_cast<double>(c->p), c->par.max);
        mn.emplace_back(static_cast<double>(c->p), c->par.mean);
        ch.emplace_back(static_cast<double>(c->p), static_cast<double>(c->k_par));
      }
      const double a_max = log_log(mx, 2).slope, a_mean = log_log(mn, 2).slope,
                   a_chain = log_log(ch, 2).slope;
      g.series.push_back({{"over", "p"},
                          {"backend", key2.first},
                          {"K", key2.second},
                          {"alpha_max", num(a_max)},
                          {"alpha_mean", num(a_mean)},
                          {"alpha_chain", num(a_chain)}});
      if (key2.second == k_top) {
        const auto worse = [](double a, double b) {
          return std::isfinite(a) && (!std::isfinite(b) || a > b);
        };
        if (worse(a_max, g.alpha_p_max)) g.alpha_p_max = a_max;
        if (worse(a_mean, g.alpha_p_mean)) g.alpha_p_mean = a_mean;
        if (worse(a_chain, g.alpha_chain_p)) g.alpha_chain_p = a_chain;
      }
      // Against p at the largest K only: there the rounding of the long chain dominates.
      const double slack = slack_over(mn);
      g.series.back()["slack"] = num(slack);
      if (key2.second == k_top && mx.size() >= 3)
        for (const double a : {a_max, a_mean})
          if (std::isfinite(a) && std::isfinite(a_chain) && a > std::max(a_chain, 0.0) + slack)
            faster_chain_p = true;
    }
    if (faster_ref) g.flags.push_back("grows faster in K than the reference's error");
    if (faster_chain_k) g.flags.push_back("grows faster in K than its chain");
    if (faster_chain_p) g.flags.push_back("grows faster in p than its chain");
    out.push_back(std::move(g));
  }
  return out;
}

const char* rule_text =
    "A computation whose longest chain of additions is k errs by at most gamma_k*|X||W|^T "
    "(rigorous), so its error in u*|X||W|^T is at most k/(1-ku): against K (or p) it can grow no "
    "faster than its chain k_par does; with independent rounding errors (statistical) it grows "
    "as lambda*sqrt(k), half that exponent. A strategy, tensor and dtype is flagged when any of "
    "its cells is outside the rigorous bound (gamma_k + u_f64, the oracle's own rounding) or the "
    "statistical one (gamma~_k(lambda) + u_f64, lambda for elements*k roundings at 1e-9), when "
    "values are missing, non-finite or differ between replicas, when it claims no chains, or when "
    "the fitted exponent (least squares in log-log, of its max or of its mean error) of some "
    "(backend, p) series against K exceeds the reference's exponent, or its chain's exponent "
    "(0 if the chain does not grow: a shrinking chain demands no shrinking error), by more than "
    "the slack; likewise against p at the largest K (3 values of p or more), against its chain. "
    "The slack is max(0.25, 2 ln 2 / ln(x_max/x_min)): a max or mean over one case's elements "
    "varies by about 2x between sizes, which moves a slope over K = 16..65536 by 0.17 and over "
    "p = 1..4 by 1.0.";

// --- the outputs ------------------------------------------------------------------------------

std::string csv_of(const std::vector<cell>& cells) {
  std::ostringstream os;
  os << "strategy,tensor,dtype,acc,reduce,backend,p,M,N,K,k_par,k_reduced,k_ref,elements,"
        "max_err_u_mag,"
        "mean_err_u_mag,ref_max_err_u_mag,ref_mean_err_u_mag,rigorous_share,statistical_share,"
        "lambda,ref_rigorous_share,ref_statistical_share,missing,nonfinite,replica_conflicts,"
        "data_aware_share,ref_data_aware_share,replay\n";
  os.precision(9);
  for (const cell& c : cells) {
    const bool mixed = is_storage16(c.type);
    os << c.strategy << ',' << c.tensor << ',' << to_string(c.type) << ','
       << (mixed ? to_string(c.policy.acc) : "") << ',' << (mixed ? to_string(c.policy.reduce) : "")
       << ',' << c.backend << ',' << c.p << ',' << c.M << ',' << c.N << ',' << c.K << ',' << c.k_par
       << ',' << c.k_reduced << ',' << c.k_ref << ',' << c.elements << ',' << c.par.max << ','
       << c.par.mean << ',' << c.ref.max << ',' << c.ref.mean << ',' << c.par_share.rigorous << ','
       << c.par_share.statistical << ',' << c.par_share.lambda << ',' << c.ref_share.rigorous << ','
       << c.ref_share.statistical << ',' << c.missing << ',' << c.par.nonfinite << ','
       << c.conflicts << ',';
    if (c.par_share.data_aware >= 0) os << c.par_share.data_aware;  // empty: not applied
    os << ',';
    if (c.ref_share.data_aware >= 0) os << c.ref_share.data_aware;
    os << ",\"" << c.replay << "\"\n";
  }
  return os.str();
}

json cell_json(const cell& c) {
  const bool mixed = is_storage16(c.type);
  return {{"strategy", c.strategy},
          {"tensor", c.tensor},
          {"dtype", to_string(c.type)},
          {"acc", mixed ? json(to_string(c.policy.acc)) : json(nullptr)},
          {"reduce", mixed ? json(to_string(c.policy.reduce)) : json(nullptr)},
          {"backend", c.backend},
          {"p", c.p},
          {"K", c.K},
          {"k_par", c.k_par},
          {"k_reduced", c.k_reduced},
          {"k_ref", c.k_ref},
          {"elements", c.elements},
          {"parallel", {{"max_err_u_mag", num(c.par.max)}, {"mean_err_u_mag", num(c.par.mean)}}},
          {"reference", {{"max_err_u_mag", num(c.ref.max)}, {"mean_err_u_mag", num(c.ref.mean)}}},
          {"rigorous_share", num(c.par_share.rigorous)},
          {"statistical_share", num(c.par_share.statistical)},
          {"lambda", c.par_share.lambda},
          {"reference_rigorous_share", num(c.ref_share.rigorous)},
          {"reference_statistical_share", num(c.ref_share.statistical)},
          {"data_aware_share",
           c.par_share.data_aware < 0 ? json(nullptr) : num(c.par_share.data_aware)},
          {"reference_data_aware_share",
           c.ref_share.data_aware < 0 ? json(nullptr) : num(c.ref_share.data_aware)},
          {"missing", c.missing},
          {"nonfinite", c.par.nonfinite},
          {"replica_conflicts", c.conflicts},
          {"chains_claimed", c.chains_claimed},
          {"replay", c.replay}};
}

// One figure per strategy: Y's max error (u·mag) against K for each (dtype, backend, p), the
// reference's per dtype, the guides √K and K through the reference's first point, and its
// chain's rigorous allowance k_par at its largest p. Returns the files written.
std::vector<std::string> plot(const std::filesystem::path& dir, const std::vector<cell>& cells,
                              const std::vector<std::string>& strategies) {
  std::vector<std::string> written;
  if (!cli_tools::gnuplot_available()) return written;
  for (const std::string& s : strategies) {
    // series: (dtype, backend, p) → K → max error; the reference per dtype; the chain at max p
    std::map<std::string, std::map<std::int64_t, double>> series, refs, chain;
    int p_top = 0;
    for (const cell& c : cells)
      if (c.strategy == s && c.tensor == "Y") p_top = std::max(p_top, c.p);
    for (const cell& c : cells) {
      if (c.strategy != s || c.tensor != "Y") continue;
      const std::string dt(to_string(c.type));
      series[type_label(c.type, c.policy) + " " + c.backend + " p=" + std::to_string(c.p)][c.K] =
          c.par.max;
      refs["reference " + dt][c.K] = c.ref.max;
      // The bounds in u·|X||W|ᵀ at the largest p, f32's (f64's differ only at K near 1/u).
      if (c.p == p_top && c.type == dtype::f32 && c.backend == "mpi") {
        chain["rigorous bound gamma_k/u, p=" + std::to_string(c.p)][c.K] =
            prop::tier_bound_in_u(c.k_par, c.type, 0);
        chain["statistical bound gamma~_k(lambda)/u, p=" + std::to_string(c.p)][c.K] =
            prop::tier_bound_in_u(c.k_par, c.type, c.par_share.lambda);
      }
    }
    if (series.empty()) continue;
    std::ostringstream dat;
    dat.precision(9);
    std::vector<std::string> titles;
    for (const auto* group : {&series, &refs, &chain})
      for (const auto& [title, pts] : *group) {
        dat << "# " << title << "\n";
        for (const auto& [k, v] : pts)
          dat << k << ' ' << (v > 0 && std::isfinite(v) ? v : NAN) << "\n";
        dat << "\n\n";
        titles.push_back(title);
      }
    const std::string base = "audit_" + s;
    {
      std::ofstream f(dir / (base + ".dat"));
      f << dat.str();
    }
    // The guides through the first reference point: c·√K and c·K.
    double k0 = 0, e0 = 0;
    for (const auto& [title, pts] : refs)
      for (const auto& [k, v] : pts)
        if (v > 0 && std::isfinite(v) && (k0 == 0 || k < k0 || (k == k0 && v > e0))) {
          k0 = static_cast<double>(k);
          e0 = v;
        }
    if (k0 == 0) {
      k0 = 16;
      e0 = 1;
    }
    for (const char* term : {"png", "svg"}) {
      const std::string ext = term;
      std::ostringstream gp;
      gp << (ext == "png" ? "set terminal pngcairo size 1100,760 noenhanced\n"
                          : "set terminal svg size 1100,760 noenhanced\n");
      gp << "set output '" << base << "." << ext << "'\n"
         << "set title '" << s << ": max |Y - oracle| / (u |X||W|^T) against K (M = N small)'\n"
         << "set logscale xy\nset xlabel 'K'\nset ylabel 'error / (u |X||W|^T)'\n"
         << "set key outside below maxrows 6\nset grid\n"
         << "plot ";
      for (std::size_t i = 0; i < titles.size(); ++i) {
        const bool is_ref = titles[i].rfind("reference", 0) == 0;
        const bool is_chain = titles[i].find("bound") != std::string::npos;
        gp << "'" << base << ".dat' index " << i << " using 1:2 with "
           << (is_chain ? (titles[i][0] == 'r' ? "lines lw 2 dt 3 lc rgb 'red'"
                                               : "lines lw 2 dt 3 lc rgb 'orange'")
               : is_ref ? "linespoints lw 3 dt 2 pt 6"
                        : "linespoints pt 7 ps 0.8")
           << " title '" << titles[i] << "', ";
      }
      gp << e0 << "*sqrt(x/" << k0 << ") with lines lc rgb 'gray40' dt 4 title 'sqrt(K) guide', "
         << e0 << "*(x/" << k0 << ") with lines lc rgb 'gray20' dt 5 title 'K guide'\n";
      if (!cli_tools::run_gnuplot(dir, base + "_" + ext + ".gp", gp.str())) continue;
      if (std::filesystem::exists(dir / (base + "." + ext))) written.push_back(base + "." + ext);
    }
  }
  return written;
}

// The settings that pick algorithms, briefly: the environment's, use_dynamic_rules, and each
// *_algorithm MPI_T reports other than 0 (0: the tuned component decides by message size).
std::string mpi_brief(const json& mpi) {
  std::string out;
  for (const auto& [k, v] : mpi["environment"].items())
    out += (out.empty() ? "" : ", ") + k + "=" + v.get<std::string>();
  out = "environment: " + (out.empty() ? std::string("none") : out) + "; MPI_T:";
  std::string algos;
  for (const auto& [k, v] : mpi["mpi_t_control_variables"].items()) {
    const bool algo = k.size() > 10 && k.compare(k.size() - 10, 10, "_algorithm") == 0;
    if (k == "coll_tuned_use_dynamic_rules" || (algo && v.is_number() && v != 0))
      algos += " " + k + "=" + v.dump();
  }
  return out + (algos.empty() ? " no algorithm pinned" : algos);
}

std::string summary_md(const std::vector<group_summary>& groups, const json& sweep, const json& mpi,
                       const std::vector<std::string>& skipped, std::size_t cells, double seconds) {
  std::ostringstream os;
  os << "# shardcheck audit\n\n"
     << "Sweep: " << sweep.dump() << "\n\n"
     << cells << " measurements (strategy × K × p × dtype × backend × output tensor) in "
     << fmt(seconds, "%.1f") << " s.\n\n"
     << "Open MPI collective settings: " << mpi_brief(mpi) << " (every one in audit.json)\n\n"
     << "Errors are against the oracle (__float128 accumulation), in units of u·|X||W|ᵀ of each "
        "element (u the storage dtype's for bf16 and f16, written storage/acc/reduce); shares "
        "are of each tier's bound for one computation (rigorous γ_k, statistical γ̃_k(λ); for "
        "bf16 and f16 of the policy's window around the oracle, which a correct result's rounding "
        "often reaches: up to 100 %); α is the fitted growth exponent (log-log least squares) of "
        "the "
        "worst (backend, p) series against K, of its chain's length, of the reference's error; "
        "α_p against p at the largest K.\n\n"
     << "| strategy | tensor | dtype | max err | mean err | ref max | ref mean | rigorous % | "
        "statistical % | α_K max | α_K mean | α_K chain | α_K ref (max/mean) | α_p mean | "
        "α_p chain | flags |\n"
     << "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const group_summary& g : groups)
    os << "| " << g.strategy << " | " << g.tensor << " | " << g.label << " | " << fmt(g.max_u)
       << " | " << fmt(g.mean_u) << " | " << fmt(g.ref_max_u) << " | " << fmt(g.ref_mean_u) << " | "
       << fmt(100 * g.rig, "%.3g") << " | " << fmt(100 * g.stat, "%.3g") << " | "
       << fmt(g.alpha_k_max) << " | " << fmt(g.alpha_k_mean) << " | " << fmt(g.alpha_chain_k)
       << " | " << fmt(g.alpha_ref_max) << "/" << fmt(g.alpha_ref_mean) << " | "
       << fmt(g.alpha_p_mean) << " | " << fmt(g.alpha_chain_p) << " | "
       << (g.flags.empty() ? "-" : flags_text(g.flags)) << " |\n";
  os << "\n**The flag rule.** " << rule_text << "\n";
  if (!skipped.empty()) {
    os << "\nNot swept:\n\n";
    for (const std::string& s : skipped) os << "- " << s << "\n";
  }
  return os.str();
}

std::vector<std::int64_t> default_ks() {
  std::vector<std::int64_t> ks;
  for (std::int64_t k = 16; k <= 65536; k *= 2) ks.push_back(k);
  return ks;
}

// "bf16, f16"
std::string join_text(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& x : v) out += (out.empty() ? "" : ", ") + x;
  return out;
}

// What the options ask for: the sizes, worker counts, backends, dtypes and subjects of the sweep,
// each checked (bad usage throws alike on every rank); `skipped` names the kernels left out.
struct sweep_plan {
  std::vector<std::int64_t> ks;
  std::vector<int> ps;
  std::vector<par::backend> backends;
  std::vector<subject_entry> subjects;
  std::vector<dtype> all_types;
  std::vector<std::string> skipped;
};

sweep_plan sweep_of(const std::vector<const par::kernel*>& kernels, const finder& find,
                    const options& o, int ranks) {
  if (o.m < 1 || o.n < 1 || o.m > 4096 || o.n > 4096)
    throw usage_error("--M and --N must be between 1 and 4096 (the audit keeps them small)");
  std::vector<std::int64_t> ks = o.ks.empty() ? default_ks() : o.ks;
  for (std::int64_t k : ks)
    if (k < 1 || k > (std::int64_t{1} << 20))
      throw usage_error("--K " + std::to_string(k) + ": between 1 and 1048576");
  std::sort(ks.begin(), ks.end());
  ks.erase(std::unique(ks.begin(), ks.end()), ks.end());
  std::vector<int> ps = o.ps;
  if (ps.empty())
    for (int p = 1; p <= ranks; ++p)
      if (ranks % p == 0) ps.push_back(p);
  for (int p : ps)
    if (p < 1 || p > ranks)
      throw usage_error("--p " + std::to_string(p) + ": between 1 and the " +
                        std::to_string(ranks) + " ranks launched");
  std::sort(ps.begin(), ps.end());
  ps.erase(std::unique(ps.begin(), ps.end()), ps.end());
  std::vector<par::backend> backends;
  for (const std::string& b :
       o.backends.empty() ? std::vector<std::string>{"native", "mpi"} : o.backends)
    backends.push_back(par::parse_backend(b));
  std::vector<dtype> only_dtypes;
  for (const std::string& d : o.dtypes) only_dtypes.push_back(parse_dtype(d));
  // The subjects: named ones (kernels or mutants), else every single-layer kernel.
  std::vector<subject_entry> subjects;
  std::vector<std::string> skipped;
  std::set<std::string> seen;
  std::string known;
  std::set<std::string> kernel_names;
  for (const par::kernel* k : kernels) {
    kernel_names.insert(k->name());
    known += (known.empty() ? "" : ", ") + k->name();
  }
  if (!o.strategies.empty()) {
    for (const std::string& n : o.strategies) {
      const prop::subject* s = find(n);
      if (s == nullptr || (kernel_names.count(n) == 0 && n.rfind("mutant.", 0) != 0))
        throw usage_error("unknown strategy '" + n + "' (known: " + known + ")");
      if (s->k->info().min_layers > 1)
        throw usage_error(n + " takes at least " + std::to_string(s->k->info().min_layers) +
                          " layers; the audit's oracle is a single layer's");
      if (seen.insert(n).second) subjects.push_back({n, s});
    }
  } else {
    for (const par::kernel* k : kernels) {
      if (kernel_names.count(k->name()) == 0) continue;
      if (k->info().min_layers > 1) {
        skipped.push_back(k->name() + ": takes at least " + std::to_string(k->info().min_layers) +
                          " layers (the oracle is a single layer's)");
        continue;
      }
      subjects.push_back({k->name(), find(k->name())});
    }
  }
  std::vector<dtype> all_types;
  for (const auto& e : subjects)
    for (dtype t : e.s->k->info().dtypes)
      if ((only_dtypes.empty() ||
           std::find(only_dtypes.begin(), only_dtypes.end(), t) != only_dtypes.end()) &&
          std::find(all_types.begin(), all_types.end(), t) == all_types.end())
        all_types.push_back(t);
  return {ks, ps, backends, subjects, all_types, skipped};
}

// Rank 0 holds the whole truth of the largest size K: the inputs, and per output its reference,
// oracle and magnitude (8 + 8 + 8 bytes an element, at most), and the oracle multiplies in
// software: M·N·K products per output. At the default M = N = 8, K = 65536: 33 MiB and 2²² each.
void check_whole_truth(const options& o, std::int64_t k, std::int64_t limit) {
  constexpr std::int64_t oracle_cap = std::int64_t{1} << 32;  // 1024 times the default sweep's
  if (checked_mul(checked_mul(o.m, o.n, "oracle work"), k, "oracle work") > oracle_cap)
    throw usage_error("audit: M·N·K = " + std::to_string(o.m) + "·" + std::to_string(o.n) + "·" +
                      std::to_string(k) +
                      " products per output is past the oracle's 2^32 (it multiplies in "
                      "__float128, in software)");
  const std::int64_t inputs = checked_add(checked_mul(o.m + o.n, k, "audit inputs"),
                                          checked_mul(o.m, o.n, "audit inputs"), "audit inputs");
  const std::int64_t outputs =
      checked_add(checked_mul(o.m, o.n, "audit outputs"),
                  checked_mul(o.m + o.n, k, "audit outputs"), "audit outputs");
  const std::int64_t bytes = checked_add(checked_mul(inputs, 8, "audit bytes"),
                                         checked_mul(outputs, 24, "audit bytes"), "audit bytes");
  if (bytes > limit)
    throw usage_error("audit: the whole truth at K=" + std::to_string(k) + " needs " +
                      prop::human_bytes(bytes) + " on rank 0, above the memory limit of " +
                      prop::human_bytes(limit) + " per rank (--memory-limit)");
}

// A cell to run: its subject and case.
struct planned {
  const subject_entry* e;
  par::run_case c;
};

// The cells, the same list on every rank: per (dtype, K) (sizes[i]), by_size[i]; a cell a kernel
// does not take is told to `skip`.
struct cell_plan {
  std::vector<std::vector<planned>> by_size;
  std::vector<std::pair<dtype, std::int64_t>> sizes;
  std::size_t total = 0;
};

cell_plan plan_cells(const sweep_plan& sw, const options& o, std::int64_t limit,
                     const std::function<void(const std::string&)>& skip) {
  cell_plan plan;
  auto& by_size = plan.by_size;
  auto& sizes = plan.sizes;
  // (dtype, K) outermost, so that the whole truth of one size is computed once and dropped before
  // the next.
  for (dtype t : sw.all_types)
    for (std::int64_t K : sw.ks) {
      std::vector<planned> list;
      for (const subject_entry& e : sw.subjects) {
        const par::kernel_info& info = e.s->k->info();
        if (!info.supports(t)) continue;
        // bf16 and f16: every precision policy the kernel declares for t (acc=f32 reduce=f32,
        // acc=f32 reduce=bf16, …); f32 and f64 have none (one pass).
        std::vector<precision> policies;
        if (is_storage16(t)) {
          for (const precision& pol : info.policies)
            if (info.supports(t, pol) &&
                std::find(policies.begin(), policies.end(), pol) == policies.end())
              policies.push_back(pol);
          if (policies.empty()) skip(e.name + " in " + std::string(to_string(t)) + ": no policy");
        } else {
          policies.push_back(precision{});
        }
        for (const precision& pol : policies)
          for (int p : sw.ps)
            for (par::backend b : sw.backends) {
              if (!info.uses_collectives && b != sw.backends.front()) continue;
              par::run_case c;
              c.strategy = e.name;
              c.p = p;
              c.prob.M = o.m;
              c.prob.N = o.n;
              c.prob.K = K;
              c.prob.type = t;
              c.policy = pol;
              c.prob.layout = info.supports(weight_layout::out_in) ? weight_layout::out_in
                                                                   : info.layouts.front();
              c.mode = value_mode::uniform;
              c.seed = o.seed;
              c.backend = b;
              try {
                if (!info.supports(value_mode::uniform))
                  throw invalid_problem("does not take uniform values");
                // A mesh of stages over one layer: all p ranks data parallel when the kernel
                // takes a dp factor (hybrid_mesh at p = 4: dp = 4, pp = tp = 1).
                if (is_pipeline(*e.s->k))
                  for (const par::param_spec& ps : info.params)
                    if (ps.name == "dp" && ps.divides_p && p <= ps.max) c.params["dp"] = p;
                par::complete_and_validate(*e.s->k, c);
                if (const auto dims = e.s->k->mesh_dims(c);
                    is_pipeline(*e.s->k) && dims.size() == 3 && dims[1] > 1)
                  throw invalid_problem("its " + std::to_string(dims[1]) +
                                        " stages need more than one layer");
                prop::check_footprint(*e.s->k, c, limit);
              } catch (const error& ex) {
                skip(e.name + " at p=" + std::to_string(p) +
                     (is_storage16(t) ? " in " + type_label(t, pol) : std::string()) + ": " +
                     ex.what());
                continue;
              }
              list.push_back({&e, c});
            }
      }
      sizes.emplace_back(t, K);
      by_size.push_back(std::move(list));
    }
  for (const auto& l : by_size) plan.total += l.size();
  return plan;
}

// Rank 0: the summary table, the files (with --out), the flags. Returns the exit status.
int report(const sweep_plan& sw, const options& o, const std::vector<cell>& cells,
           const std::vector<std::string>& skipped, std::size_t total, double seconds,
           const json& mpi, int ranks) {
  int status = 0;
  bool unwritten = false;
  const auto& ks = sw.ks;
  const auto& ps = sw.ps;
  const auto& backends = sw.backends;
  const auto& all_types = sw.all_types;
  const auto& subjects = sw.subjects;
  const std::vector<group_summary> groups = summarize(cells);
  json sweep = {{"M", o.m},          {"N", o.n},       {"K", ks},       {"p", ps},
                {"mode", "uniform"}, {"seed", o.seed}, {"ranks", ranks}};
  json bj = json::array();
  for (par::backend b : backends) bj.push_back(par::to_string(b));
  sweep["backends"] = bj;
  json tj = json::array();
  for (dtype t : all_types) tj.push_back(to_string(t));
  sweep["dtypes"] = tj;
  json sj = json::array();
  for (const auto& e : subjects) sj.push_back(e.name);
  sweep["strategies"] = sj;
  std::printf(
      "shardcheck audit: %d ranks, %zu cells (strategy x K x p x dtype x backend), "
      "%zu tensor measurements in %.1f s\n",
      ranks, total, cells.size(), seconds);
  std::printf("%-28s %-3s %-13s %9s %9s %9s %8s %8s %7s %7s %7s  %s\n", "strategy", "out", "type",
              "max err", "mean err", "ref max", "rig%", "stat%", "aK", "aK ch", "aK ref", "flags");
  for (const group_summary& g : groups)
    std::printf("%-28s %-3s %-13s %9s %9s %9s %8s %8s %7s %7s %7s  %s\n", g.strategy.c_str(),
                g.tensor.c_str(), g.label.c_str(), fmt(g.max_u).c_str(), fmt(g.mean_u).c_str(),
                fmt(g.ref_max_u).c_str(), fmt(100 * g.rig, "%.3g").c_str(),
                fmt(100 * g.stat, "%.3g").c_str(), fmt(g.alpha_k_mean).c_str(),
                fmt(g.alpha_chain_k).c_str(), fmt(g.alpha_ref_mean).c_str(),
                g.flags.empty() ? "-" : flags_text(g.flags).c_str());
  for (const std::string& s : skipped) std::printf("skipped %s\n", s.c_str());
  if (!o.out.empty()) try {
      namespace fs = std::filesystem;
      const fs::path dir(o.out);
      std::vector<std::string> names;
      for (const auto& e : subjects) names.push_back(e.name);
      const std::vector<std::string> plots = plot(dir, cells, names);
      json out;
      out["command"] = "audit";
      out["sweep"] = sweep;
      out["open_mpi"] = mpi;
      out["seconds"] = seconds;
      out["rule"] = rule_text;
      out["growth_slack"] = growth_slack;
      out["false_alarm_target"] = false_alarm_target;
      json gs = json::array();
      for (const group_summary& g : groups)
        gs.push_back({{"strategy", g.strategy},
                      {"tensor", g.tensor},
                      {"dtype", to_string(g.type)},
                      {"type", g.label},
                      {"max_err_u_mag", num(g.max_u)},
                      {"mean_err_u_mag", num(g.mean_u)},
                      {"reference_max_err_u_mag", num(g.ref_max_u)},
                      {"reference_mean_err_u_mag", num(g.ref_mean_u)},
                      {"rigorous_share", num(g.rig)},
                      {"statistical_share", num(g.stat)},
                      {"alpha_K_max", num(g.alpha_k_max)},
                      {"alpha_K_mean", num(g.alpha_k_mean)},
                      {"alpha_K_chain", num(g.alpha_chain_k)},
                      {"alpha_K_reference_max", num(g.alpha_ref_max)},
                      {"alpha_K_reference_mean", num(g.alpha_ref_mean)},
                      {"alpha_p_max", num(g.alpha_p_max)},
                      {"alpha_p_mean", num(g.alpha_p_mean)},
                      {"alpha_p_chain", num(g.alpha_chain_p)},
                      {"series", g.series},
                      {"flags", g.flags},
                      {"flagged", !g.flags.empty()}});
      out["summary"] = gs;
      json cj = json::array();
      for (const cell& c : cells) cj.push_back(cell_json(c));
      out["cells"] = cj;
      out["skipped"] = skipped;
      out["plots"] = plots;
      out["complete"] = true;
      runner::write_file((dir / "audit.csv").string(), csv_of(cells));
      runner::write_file((dir / "audit_summary.md").string(),
                         summary_md(groups, sweep, mpi, skipped, cells.size(), seconds));
      runner::write_file((dir / "audit.json").string(), out.dump(2) + "\n");
      runner::results_final();
      if (plots.empty())
        std::printf(
            "plots not written: gnuplot was not found or failed (apt-get install "
            "gnuplot-nox)\n");
      std::printf("wrote %s/audit.csv, audit.json, audit_summary.md and %zu plots\n", o.out.c_str(),
                  plots.size());
    } catch (const error& e) {
      // The other ranks wait for the status: a file not written is told, not thrown.
      std::fprintf(stderr, "shardcheck: %s\n", runner::escape(e.what()).c_str());
      unwritten = true;
    }
  for (const group_summary& g : groups)
    if (!g.flags.empty()) {
      std::printf("FLAGGED %s: %s %s %s\n", g.strategy.c_str(), g.tensor.c_str(), g.label.c_str(),
                  flags_text(g.flags).c_str());
      status = 1;
    }
  // Every planned cell failed to run: nothing was measured, which is no pass.
  if (cells.empty()) {
    std::fprintf(stderr,
                 "shardcheck: nothing was checked: every cell of the sweep failed to run "
                 "(each one's reason is above)\n");
    status = prop::exit_code::usage;
  }
  if (unwritten) status = prop::exit_code::usage;
  return status;
}

}  // namespace

CLI::App* add_subcommand(CLI::App& app, options& o) {
  auto* c = app.add_subcommand(
      "audit",
      "Numerical-stability sweep (under mpirun): strategies x K x p x dtype x backend, every "
      "element against the high-precision oracle; CSV, JSON, plots and a summary");
  c->add_option("--out", o.out, "Directory for audit.csv, audit.json, the plots, the summary");
  runner::add_memory_limit(c, o.memory_limit);
  c->add_option("--strategy", o.strategies,
                "Strategy or mutant to audit (repeatable; default: every single-layer kernel)");
  c->add_option("--K", o.ks, "Contraction lengths (repeatable; default 16 32 64 … 65536)");
  c->add_option("--p", o.ps, "Worker counts (repeatable; default: the divisors of the ranks)");
  c->add_option("--dtype", o.dtypes, "Dtypes (repeatable; default: what each kernel declares)");
  c->add_option("--backend", o.backends, "Backends (repeatable; default: native and mpi)");
  c->add_option("--M", o.m, "Rows of X")->capture_default_str();
  c->add_option("--N", o.n, "Output features")->capture_default_str();
  c->add_option("--seed", o.seed, "Seed of the uniform values")
      ->capture_default_str()
      ->check(runner::unsigned_integer());
  c->add_flag("--quiet", o.quiet, "No progress bar");
  return c;
}

int run(const std::vector<const par::kernel*>& kernels, const finder& find, const options& o) {
  par::comm world = par::comm::world();
  const int ranks = world.size(), rank = world.rank();
  sweep_plan sw = sweep_of(kernels, find, o, ranks);
  std::vector<std::string>& skipped = sw.skipped;
  if (!o.out.empty()) {
    runner::prepare_out_dir("--out", o.out);
    if (rank == 0) runner::partial_file((std::filesystem::path(o.out) / "audit.json").string());
  }
  const std::int64_t limit = runner::memory_limit(o.memory_limit);
  check_whole_truth(o, sw.ks.back(), limit);
  std::set<std::string> skip_seen;
  const auto skip = [&](const std::string& why) {
    if (skip_seen.insert(why).second) skipped.push_back(why);
  };
  const cell_plan plan = plan_cells(sw, o, limit, skip);
  const auto& by_size = plan.by_size;
  const auto& sizes = plan.sizes;
  const std::size_t total = plan.total;
  if (total == 0) {
    std::string why;
    for (const std::string& x : skipped) why += (why.empty() ? "" : "; ") + x;
    // No subject declares a dtype asked for: each one's dtypes say why.
    if (sw.all_types.empty())
      for (const subject_entry& e : sw.subjects) {
        std::string types;
        for (dtype t : e.s->k->info().dtypes)
          types += (types.empty() ? "" : ", ") + std::string(to_string(t));
        why += (why.empty() ? "" : "; ") + e.name + " takes " + types + ", not --dtype " +
               join_text(o.dtypes);
      }
    runner::nothing_checked("no cell of the sweep runs" +
                            (why.empty() ? std::string() : " (" + why + ")"));
  }
  std::vector<par::comm> subs;  // subs[p − 1]: ranks 0 … p − 1
  for (int p = 1; p <= ranks; ++p) subs.push_back(world.split(rank < p ? 0 : -1, rank));

  cli_tools::progress bar(rank == 0 && !o.quiet, static_cast<int>(total));
  std::vector<cell> cells;
  const double t0 = MPI_Wtime();
  for (std::size_t si = 0; si < by_size.size(); ++si) {
    const auto [t, K] = sizes[si];
    if (by_size[si].empty()) continue;
    // The leader's truth of this size: the reference's errors once, shared by every strategy.
    std::optional<prop::truth<float>> tf;
    std::optional<prop::truth<double>> td;
    std::optional<prop::truth<bfloat16_t>> tb;
    std::optional<prop::truth<half_t>> th;
    error_stats ref_err[3];
    shares ref_window[3];  // bf16 and f16: the reference's share of its window
    const std::vector<double>* oracle_of[3] = {};
    const std::vector<double>* mag_of[3] = {};
    const std::vector<double>* squares_of[3] = {};
    double ref_aware[3] = {-1, -1, -1};  // the reference's share of the data-aware bound
    std::int64_t k_ref_of[3] = {};
    const double u = ref::unit_roundoff(t);
    if (rank == 0) {
      const par::run_case& c0 = by_size[si].front().c;
      const auto take = [&](auto& truth) {
        for (int i = 0; i < 3; ++i) {
          const auto& o = truth.out[i];
          oracle_of[i] = &o.oracle;
          mag_of[i] = &o.magnitude;
          squares_of[i] = &o.squares;
          if (!o.squares.empty())
            ref_aware[i] =
                prop::data_aware_share(std::vector<double>(o.reference.begin(), o.reference.end()),
                                       o.oracle, o.magnitude, o.squares, o.k_ref, t);
          k_ref_of[i] = o.k_ref;
          ref_err[i] = measure(o.reference, o.oracle, o.magnitude, u);
          if (is_storage16(t)) {
            std::vector<double> r(o.reference.size());
            for (std::size_t j = 0; j < r.size(); ++j)
              r[j] = static_cast<double>(static_cast<float>(o.reference[j]));
            ref_window[i] = prop::oracle_window_shares(r, o.oracle, o.magnitude, o.k_ref, 0,
                                                       o.k_ref, t, std::nullopt);
          }
        }
      };
      switch (t) {
        case dtype::f32: take(tf.emplace(prop::whole_truth<float>(c0))); break;
        case dtype::f64: take(td.emplace(prop::whole_truth<double>(c0))); break;
        case dtype::bf16: take(tb.emplace(prop::whole_truth<bfloat16_t>(c0))); break;
        case dtype::f16: take(th.emplace(prop::whole_truth<half_t>(c0))); break;
      }
    }
    for (const planned& pl : by_size[si]) {
      const par::run_case& c = pl.c;
      if (rank < c.p) {
        values::gathered g;
        std::string failure;
        try {
          g = values::run_and_gather(*pl.e->s, c, subs[static_cast<std::size_t>(c.p - 1)]);
        } catch (const std::exception& ex) {
          failure = ex.what();
        }
        if (rank == 0 && !failure.empty())
          skip(pl.e->name + ": " + failure + " (" + c.to_string() + ")");
        if (rank == 0 && failure.empty()) {
          for (std::size_t i = 0; i < g.outputs.size() && i < 3; ++i) {
            const values::gathered_tensor& gt = g.outputs[i];
            const std::vector<double>& oracle = *oracle_of[i];
            const std::vector<double>& mag = *mag_of[i];
            cell ce;
            ce.strategy = pl.e->name;
            ce.tensor = gt.name;
            ce.backend = std::string(par::to_string(c.backend));
            ce.replay = c.to_string();
            ce.type = t;
            ce.policy = c.policy;
            ce.M = c.prob.M;
            ce.N = c.prob.N;
            ce.K = K;
            ce.p = c.p;
            const par::chain_lengths& ch = g.chains.front();
            ce.k_par = i == 0 ? ch.y : i == 1 ? ch.dx : ch.dw;
            ce.k_reduced = std::min(i == 0   ? ch.reduced.y
                                    : i == 1 ? ch.reduced.dx
                                             : ch.reduced.dw,
                                    ce.k_par);
            ce.k_ref = k_ref_of[i];
            ce.chains_claimed = g.chains_claimed;
            ce.elements = static_cast<std::int64_t>(oracle.size());
            ce.missing = gt.missing;
            ce.conflicts = gt.conflicts;
            ce.par = measure(gt.value, oracle, mag, u);
            ce.ref = ref_err[i];
            if (is_storage16(t)) {
              ce.par_share =
                  prop::oracle_window_shares(gt.value, oracle, mag, ce.k_par - ce.k_reduced,
                                             ce.k_reduced, ce.k_ref, t, c.policy);
              ce.ref_share = ref_window[i];
            } else {
              ce.par_share = prop::oracle_shares_of(ce.par.max, std::max<std::int64_t>(ce.k_par, 1),
                                                    ce.elements, t);
              ce.ref_share = prop::oracle_shares_of(ce.ref.max, ce.k_ref, ce.elements, t);
              ce.par_share.data_aware = prop::data_aware_share(
                  gt.value, oracle, mag, *squares_of[i], std::max<std::int64_t>(ce.k_par, 1), t);
              ce.ref_share.data_aware = ref_aware[i];
            }
            cells.push_back(std::move(ce));
          }
        }
      }
      bar.step(c.strategy + " K=" + std::to_string(K) + " p=" + std::to_string(c.p) + " " +
               type_label(t, c.policy) + " " + std::string(par::to_string(c.backend)));
    }
  }
  bar.finish();
  par::check_mpi(MPI_Barrier(MPI_COMM_WORLD), "audit: barrier");
  const double seconds = MPI_Wtime() - t0;
  const json mpi = open_mpi_settings();
  int status = 0;
  if (rank == 0) {
    status = report(sw, o, cells, skipped, total, seconds, mpi, ranks);
    std::fflush(stdout);
  }
  par::check_mpi(MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD), "audit: status");
  return status;
}

}  // namespace shardcheck::audit
