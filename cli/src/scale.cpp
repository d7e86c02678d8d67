#include "scale.hpp"

#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "plotting.hpp"
#include "runner.hpp"
#include "shardcheck/parallel/memory.hpp"
#include "shardcheck/properties/footprint.hpp"
#include "shardcheck/properties/harness.hpp"

namespace shardcheck::scale {

namespace {

using json = nlohmann::ordered_json;
using prop::human_bytes;

struct usage_error : error {
  using error::error;
};

// How a strategy's shape grows with p so that a rank's shard stays fixed: the dimensions its
// mesh splits. data_parallel at p = 4 on the unit 256³: M = 1024 (X's rows, 256 a rank);
// SUMMA on a pr × pc mesh (pr the largest divisor of p up to √p): M·pr, N·pc, K fixed.
// A parameter that would hold a growing tensor whole on every rank is set so that it does not:
// data_parallel's gather=1 all-gathers Y (M × N, M = p·m) to every rank.
struct rule {
  std::string dims;  // "M", "N", "K", or "MN" (SUMMA: M by pr, N by pc)
  std::string why;
  std::map<std::string, std::int64_t> params;
};
const std::map<std::string, rule, std::less<>>& rules() {
  static const std::map<std::string, rule, std::less<>> r = {
      {"data_parallel",
       {"M",
        "gather=0: X, Y, dY, dX by rows, M = p·m; W and dW whole on every rank",
        {{"gather", 0}}}},
      {"sharded_weights",
       {"M", "X, Y, dY, dX by rows, M = p·m; W and dW by rows (N/p each, N fixed)", {}}},
      {"column_parallel",
       {"N",
        "gather=0: W, Y, dY, dW by output features, N = p·n; X and dX whole",
        {{"gather", 0}}}},
      {"row_parallel",
       {"K", "X, W, dX, dW by input features, K = p·k; Y and dY whole (all-reduced)", {}}},
      {"summa",
       {"MN", "pr × pc mesh, pr the largest divisor of p up to √p: M = pr·m, N = pc·n, K = k", {}}},
  };
  return r;
}

int summa_rows(int p) {
  int pr = 1;
  for (int d = 1; d * d <= p; ++d)
    if (p % d == 0) pr = d;
  return pr;
}

std::vector<int> parse_workers(const std::string& text, int ranks) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    int v = 0;
    try {
      std::size_t used = 0;
      v = std::stoi(item, &used);
      if (used != item.size()) v = 0;
    } catch (const std::exception&) {
      v = 0;
    }
    if (v < 1) throw usage_error("--p '" + text + "': worker counts from 1, e.g. 1,2,4,8,16");
    if (v > ranks)
      throw usage_error("--p: " + std::to_string(v) + " workers need " + std::to_string(v) +
                        " ranks; " + std::to_string(ranks) + " were launched (mpirun -n)");
    out.push_back(v);
  }
  if (out.empty()) throw usage_error("--p: no worker count");
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// What one rank measured of one case (zeros on a rank outside it).
constexpr int fields = 6;
struct rank_figures {
  double peak = 0;        // the meter's peak over the whole case (inputs, outputs, reference…)
  double check_peak = 0;  // the meter's peak while the outputs were checked
  double panels = 0;      // input panels generated for the reference, bytes
  double flops = 0;       // reference and magnitudes
  double check_s = 0;     // time checking the outputs
  double failed = 0;      // 1: a property failed here
};

struct point {
  std::string name;
  int p = 0;
  par::run_case c;
  std::vector<rank_figures> ranks;  // rank 0 only: every worker's
  double footprint_s = 0;           // the leader's prop::footprint_of for the case
  std::int64_t footprint_bytes = 0;
  std::string failure;
};

double max_of(const std::vector<rank_figures>& v, double rank_figures::*f) {
  double m = 0;
  for (const rank_figures& r : v) m = std::max(m, r.*f);
  return m;
}

std::string mib(double b) { return human_bytes(static_cast<std::int64_t>(b)); }

std::string flops_text(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MFLOP", f / 1e6);
  return buf;
}

json point_json(const point& pt) {
  json per = json::object();
  const std::pair<const char*, double rank_figures::*> cols[] = {
      {"peak_bytes", &rank_figures::peak},
      {"check_peak_bytes", &rank_figures::check_peak},
      {"check_panel_bytes", &rank_figures::panels},
      {"check_flops", &rank_figures::flops},
      {"check_s", &rank_figures::check_s}};
  json largest = json::object();
  for (const auto& [name, f] : cols) {
    json a = json::array();
    for (const rank_figures& r : pt.ranks) a.push_back(r.*f);
    per[name] = a;
    largest[name] = max_of(pt.ranks, f);
  }
  return {{"strategy", pt.name},
          {"p", pt.p},
          {"M", pt.c.prob.M},
          {"N", pt.c.prob.N},
          {"K", pt.c.prob.K},
          {"case", pt.c.to_string()},
          {"per_rank", per},
          {"largest_rank", largest},
          {"leader_footprint_s", pt.footprint_s},
          {"footprint_bytes", pt.footprint_bytes},
          {"failure", pt.failure}};
}

std::vector<std::string> plot(const std::filesystem::path& dir, const std::vector<point>& all,
                              const std::vector<std::string>& names) {
  {
    std::ofstream d(dir / "scale.dat");
    for (const std::string& n : names) {
      d << "# " << n << ": p peak_MiB check_peak_MiB panels_MiB check_MFLOP check_ms\n";
      for (const point& pt : all)
        if (pt.name == n)
          d << pt.p << " " << max_of(pt.ranks, &rank_figures::peak) / 1048576 << " "
            << max_of(pt.ranks, &rank_figures::check_peak) / 1048576 << " "
            << max_of(pt.ranks, &rank_figures::panels) / 1048576 << " "
            << max_of(pt.ranks, &rank_figures::flops) / 1e6 << " "
            << max_of(pt.ranks, &rank_figures::check_s) * 1e3 << "\n";
      d << "\n\n";
    }
  }
  if (!cli_tools::gnuplot_available()) return {};
  const auto script = [&](const std::string& ext) {
    std::ostringstream gp;
    gp << "set output 'scale." << ext << "'\n"
       << "set multiplot layout 1,3 title 'weak scaling: the shard of each rank fixed (largest "
          "rank)'\n"
       << "set logscale x 2\nset xlabel 'workers p'\nset grid\nset key top left\n"
          "set offsets 0, 0, graph 0.6, 0\nset yrange [0:*]\n";
    const auto series = [&](int col) {
      std::string s;
      for (std::size_t i = 0; i < names.size(); ++i)
        s += (i == 0 ? "" : ", ") + std::string("'scale.dat' index ") + std::to_string(i) +
             " using 1:" + std::to_string(col) + " with linespoints title '" + names[i] + "'";
      return s;
    };
    gp << "set title 'peak memory (meter, whole case)'\nset ylabel 'MiB'\nplot " << series(2)
       << "\n";
    gp << "unset key\nset title 'input panels the check generates'\nset ylabel 'MiB'\nplot "
       << series(4) << "\n";
    gp << "set title 'reference and magnitude flops'\nset ylabel 'MFLOP'\nplot " << series(5)
       << "\n";
    gp << "unset multiplot\n";
    return gp.str();
  };
  std::vector<std::string> written;
  for (const std::string ext : {"png", "svg"}) {
    const std::string terminal = ext == "png" ? "set terminal pngcairo size 1000,560 noenhanced\n"
                                              : "set terminal svg size 1000,560 noenhanced\n";
    if (!cli_tools::run_gnuplot(dir, "scale_" + ext + ".gp", terminal + script(ext))) continue;
    if (std::filesystem::exists(dir / ("scale." + ext))) written.push_back("scale." + ext);
  }
  return written;
}

// Every case of the run, before the first runs: per strategy (--strategy, or the five with a
// weak-scaling rule) and worker count, its shape grown from the unit. A shape that cannot be
// held is bad usage, alike everywhere. `names` receives the strategies.
std::vector<point> plan_points(const std::vector<const par::kernel*>& kernels,
                               const compare::finder& find, const options& o,
                               const std::vector<int>& workers, dtype type,
                               std::vector<std::string>& names) {
  std::set<std::string> known;
  for (const par::kernel* k : kernels) known.insert(k->name());
  names = o.strategies;
  if (names.empty())
    for (const char* n :
         {"data_parallel", "sharded_weights", "column_parallel", "row_parallel", "summa"})
      names.emplace_back(n);
  for (const std::string& n : names) {
    if (find(n) == nullptr || (known.count(n) == 0 && n.rfind("mutant.", 0) != 0))
      throw usage_error("unknown strategy '" + n + "'");
    if (o.grow.empty() && rules().count(n) == 0)
      throw usage_error(n +
                        " has no weak-scaling rule here (a stack, or a layout chosen by "
                        "parameters): name the dimensions that grow with --grow");
  }
  const std::int64_t limit = runner::memory_limit(o.memory_limit);
  par::check_method check = par::check_method::automatic;
  try {
    check = par::parse_check_method(o.check);
  } catch (const invalid_problem&) {
    throw usage_error("--check '" + o.check + "': expected auto, reference or projection");
  }
  std::vector<point> all;
  for (const std::string& n : names) {
    const prop::subject* s = find(n);
    const auto it = rules().find(n);
    const std::string grow = !o.grow.empty() ? o.grow : it->second.dims;
    for (const int p : workers) {
      point pt;
      pt.name = n;
      pt.p = p;
      par::run_case& c = pt.c;
      c.strategy = n;
      c.p = p;
      c.prob.type = type;
      c.mode = value_mode::uniform;
      c.seed = 1;
      c.check = check;
      const bool summa_mesh = o.grow.empty() && grow == "MN";
      const int pr = summa_rows(p);
      const auto times = [&](char d, std::int64_t unit) {
        if (summa_mesh) return checked_mul(unit, d == 'M' ? pr : d == 'N' ? p / pr : 1, "shape");
        return grow.find(d) != std::string::npos ? checked_mul(unit, p, "shape") : unit;
      };
      c.prob.M = times('M', o.m);
      c.prob.N = times('N', o.n);
      c.prob.K = times('K', o.k);
      if (summa_mesh) c.params["pr"] = pr;
      if (o.grow.empty())
        for (const auto& [name, v] : it->second.params) c.params[name] = v;
      try {
        par::complete_and_validate(*s->k, c);
      } catch (const invalid_problem& e) {
        throw usage_error(n + " at p=" + std::to_string(p) + ": " + e.what());
      }
      prop::check_footprint(*s->k, c, limit);
      all.push_back(std::move(pt));
    }
  }
  return all;
}

// Rank 0: the table and, with --out, scale.json and the plot.
void report(const std::vector<point>& all, const std::vector<std::string>& names,
            const std::vector<int>& workers, const options& o, int ranks) {
  std::printf(
      "shardcheck scale: weak scaling on %d ranks, unit M=%lld N=%lld K=%lld dtype=%s; "
      "per rank, the largest\n",
      ranks, static_cast<long long>(o.m), static_cast<long long>(o.n), static_cast<long long>(o.k),
      o.dtype.c_str());
  // The check's wall time before the panels: "12.34 ms " (ci/readme_outputs.py sets it aside).
  std::printf("%-16s %3s %20s %11s %11s %11s %11s %13s\n", "strategy", "p", "shape (M×N×K)",
              "peak/rank", "check peak", "check time", "panels", "check flops");
  json points = json::array();
  for (const point& pt : all) {
    const std::string shape = std::to_string(pt.c.prob.M) + "×" + std::to_string(pt.c.prob.N) +
                              "×" + std::to_string(pt.c.prob.K);
    std::printf("%-16s %3d %20s %11s %11s %8.2f ms %11s %13s\n", pt.name.c_str(), pt.p,
                shape.c_str(), mib(max_of(pt.ranks, &rank_figures::peak)).c_str(),
                mib(max_of(pt.ranks, &rank_figures::check_peak)).c_str(),
                max_of(pt.ranks, &rank_figures::check_s) * 1e3,
                mib(max_of(pt.ranks, &rank_figures::panels)).c_str(),
                flops_text(max_of(pt.ranks, &rank_figures::flops)).c_str());
    if (!pt.failure.empty())
      std::printf("FAIL %s p=%d: %s\n", pt.name.c_str(), pt.p, pt.failure.c_str());
    points.push_back(point_json(pt));
  }
  if (!o.out.empty()) {
    const std::filesystem::path dir(o.out);
    json rules_json = json::object();
    for (const std::string& n : names)
      rules_json[n] = o.grow.empty()
                          ? json{{"grows", rules().at(n).dims}, {"shards", rules().at(n).why}}
                          : json{{"grows", o.grow}, {"shards", "--grow"}};
    const json doc = {{"complete", true},
                      {"machine", compare::machine_json(ranks)},
                      {"unit", {{"M", o.m}, {"N", o.n}, {"K", o.k}}},
                      {"dtype", o.dtype},
                      {"check", o.check},
                      {"workers", workers},
                      {"rules", rules_json},
                      {"points", points},
                      {"plots", plot(dir, all, names)}};
    runner::write_file((dir / "scale.json").string(), doc.dump(2) + "\n");
    runner::results_final();
    std::printf("wrote %s\n", (dir / "scale.json").string().c_str());
  }
}

}  // namespace

CLI::App* add_subcommand(CLI::App& app, options& o) {
  auto* c = app.add_subcommand(
      "scale",
      "Weak scaling of the verification (under mpirun): each strategy's shape grows with p, a "
      "rank's shard fixed; every rank's peak memory and verification work against p");
  c->add_option("--M", o.m, "Rows of X at p = 1 (the shard unit)")->required();
  c->add_option("--N", o.n, "Output features at p = 1")->required();
  c->add_option("--K", o.k, "Input features at p = 1")->required();
  c->add_option("--strategy", o.strategies,
                "Strategy (repeatable; default: data_parallel, sharded_weights, column_parallel, "
                "row_parallel, summa)");
  c->add_option("--grow", o.grow,
                "Dimensions that grow with p, e.g. M or MK (default: the strategy's own)");
  c->add_option("--p", o.workers, "Worker counts, each at most the ranks launched")
      ->capture_default_str();
  c->add_option("--dtype", o.dtype, "f32 or f64")->capture_default_str();
  c->add_option("--check", o.check,
                "How outputs are judged, as verify --check: auto, reference or projection")
      ->capture_default_str();
  c->add_option("--out", o.out, "Directory for scale.json and the plot (created)");
  runner::add_memory_limit(c, o.memory_limit);
  c->add_flag("--quiet", o.quiet, "No line per case on stderr");
  return c;
}

int run(const std::vector<const par::kernel*>& kernels, const compare::finder& find,
        const options& o) {
  if (o.m < 1 || o.n < 1 || o.k < 1)
    throw usage_error("--M, --N and --K must be at least 1 (got " + std::to_string(o.m) + ", " +
                      std::to_string(o.n) + ", " + std::to_string(o.k) + ")");
  for (const char d : o.grow)
    if (d != 'M' && d != 'N' && d != 'K')
      throw usage_error("--grow '" + o.grow + "': a subset of M, N and K, e.g. M or MK");
  par::comm world = par::comm::world();
  const int ranks = world.size(), me = world.rank();
  const std::vector<int> workers = parse_workers(o.workers, ranks);
  const dtype type = parse_dtype(o.dtype);
  // bf16 and f16 cases have no check figures here (their verdict is the window's): scale would
  // report 0 B of panels and 0 flops.
  if (type != dtype::f32 && type != dtype::f64)
    throw usage_error("--dtype " + o.dtype + ": scale measures f32 or f64");
  std::vector<std::string> names;
  std::vector<point> all = plan_points(kernels, find, o, workers, type, names);
  if (!o.out.empty()) {
    runner::prepare_out_dir("--out", o.out);
    if (me == 0) runner::partial_file((std::filesystem::path(o.out) / "scale.json").string());
  }
  runner::begin_steps(static_cast<int>(all.size()));
  std::vector<par::comm> subs;
  for (const int p : workers) subs.push_back(world.split(me < p ? 0 : -1, me));
  int failed = 0;
  for (point& pt : all) {
    const prop::subject* s = find(pt.name);
    const std::size_t at =
        static_cast<std::size_t>(std::find(workers.begin(), workers.end(), pt.p) - workers.begin());
    if (me == 0) {
      // What the leader of `verify` computes for every drawn case before it runs: the footprint
      // of each of the p ranks (driver.cpp, with a memory limit).
      const auto t0 = std::chrono::steady_clock::now();
      pt.footprint_bytes = prop::footprint_of(*s->k, pt.c).bytes;
      pt.footprint_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    rank_figures mine;
    std::string message;
    if (me < pt.p) {
      prop::verdict v;
      {
        mem::peak_scope scope;
        v = prop::run_on_rank(*s, pt.c, subs[at], prop::all_properties);
        mine.peak = static_cast<double>(scope.peak());
      }
      mine.check_peak = static_cast<double>(v.check_peak_bytes);
      mine.panels = static_cast<double>(v.check_panel_bytes);
      mine.flops = static_cast<double>(v.check_flops);
      mine.check_s = v.check_seconds;
      mine.failed = v.failed != 0 ? 1 : 0;
      message = v.message;
    }
    std::vector<double> gathered(static_cast<std::size_t>(ranks) * fields);
    const double row[fields] = {mine.peak,  mine.check_peak, mine.panels,
                                mine.flops, mine.check_s,    mine.failed};
    par::check_mpi(MPI_Gather(row, fields, MPI_DOUBLE, gathered.data(), fields, MPI_DOUBLE, 0,
                              world.native_handle()),
                   "scale: gather");
    int bad = mine.failed != 0 ? me : ranks, lowest = ranks;
    par::check_mpi(MPI_Allreduce(&bad, &lowest, 1, MPI_INT, MPI_MIN, world.native_handle()),
                   "scale: verdict");
    if (lowest < ranks) {
      ++failed;
      if (lowest != 0 && me == lowest)
        par::check_mpi(MPI_Send(message.data(), static_cast<int>(message.size()), MPI_CHAR, 0, 3,
                                world.native_handle()),
                       "scale: message");
      if (me == 0 && lowest != 0) {
        MPI_Status st;
        par::check_mpi(MPI_Probe(lowest, 3, world.native_handle(), &st), "scale: message");
        int len = 0;
        MPI_Get_count(&st, MPI_CHAR, &len);
        message.assign(static_cast<std::size_t>(len), '\0');
        par::check_mpi(MPI_Recv(message.data(), len, MPI_CHAR, lowest, 3, world.native_handle(),
                                MPI_STATUS_IGNORE),
                       "scale: message");
      }
      pt.failure = message;
    }
    if (me == 0) {
      for (int q = 0; q < pt.p; ++q) {
        const double* g = gathered.data() + static_cast<std::size_t>(q) * fields;
        pt.ranks.push_back({g[0], g[1], g[2], g[3], g[4], g[5]});
      }
      if (!o.quiet)
        std::fprintf(stderr, "  %s p=%d: %.2f ms checking on the slowest rank\n", pt.name.c_str(),
                     pt.p, max_of(pt.ranks, &rank_figures::check_s) * 1e3);
    }
    runner::step(pt.name + " p=" + std::to_string(pt.p));
  }
  if (me != 0) return failed > 0 ? 1 : 0;

  report(all, names, workers, o, ranks);
  return failed > 0 ? 1 : 0;
}

}  // namespace shardcheck::scale
