#include "dump.hpp"

#include <mpi.h>

#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "npy.hpp"
#include "plotting.hpp"
#include "runner.hpp"
#include "shardcheck/parallel/plan.hpp"
#include "shardcheck/properties/verdict.hpp"
#include "shardcheck/reference/bound.hpp"
#include "values.hpp"

namespace shardcheck::dump {

namespace {

using json = nlohmann::ordered_json;

// Rank 0's error, raised on every rank.
void agree(const std::string& what_went_wrong) {
  int n = static_cast<int>(what_went_wrong.size());
  MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (n == 0) return;
  std::string msg = what_went_wrong;
  msg.resize(static_cast<std::size_t>(n));
  MPI_Bcast(msg.data(), n, MPI_CHAR, 0, MPI_COMM_WORLD);
  throw error(msg);
}

const char* readme_text =
    "Values of one shardcheck case (verify --replay ... --dump), one .npy file each; load with\n"
    "numpy.load(name). Row-major, global indices (every rank's block gathered in place).\n"
    "\n"
    "  x.npy, w.npy, dy.npy      the inputs X (M x K), W (N x K for layout=out_in, K x N for\n"
    "                            in_out) and dY (M x N), in the case's dtype\n"
    "  y_parallel.npy            Y as the strategy computed it (the case's dtype)\n"
    "  y_reference.npy           Y from the single-device reference (OpenBLAS, the case's dtype)\n"
    "  y_oracle.npy              Y accumulated in __float128, rounded once to float64\n"
    "  y_magnitude.npy           |X|.|W|^T (float64): the error bounds are multiples of it\n"
    "  dx_*.npy, dw_*.npy        the same four for dX = dY.W and dW = dY^T.X\n"
    "  case.json                 the replay line, u, the chains k_par (claimed) and k_ref, and\n"
    "                            per tensor the largest |parallel - reference| / bound, where\n"
    "                            bound = (gamma(k_par) + gamma(k_ref)) * magnitude / (1 - "
    "gamma(k_ref) in f64),\n"
    "                            (0 in exact mode: bitwise), and the largest\n"
    "                            |parallel - oracle| / (u * magnitude)\n"
    "\n"
    "  y_error.png, dx_error.png, dw_error.png\n"
    "                            |parallel - reference| / bound over each output (the bound\n"
    "                            above; exact mode: 0 where equal, 2 where not), the rank\n"
    "                            blocks outlined and named (ranks holding a block alike\n"
    "                            together); > 1 is out of bound, 2 or more is drawn as 2; a\n"
    "                            large output in bins of several elements, each its largest\n"
    "                            value; gray where no rank held the element\n"
    "\n"
    "A parallel value no rank held is NaN (case.json counts them as missing).\n";

// A block of an output's elements, [r0, r1) × [c0, c1), and the ranks that hold it ("0,2").
struct tile {
  std::int64_t r0 = 0, r1 = 0, c0 = 0, c1 = 0;
  std::string ranks;
};

// The tiles each rank of c holds of output t (its block, run by run), ranks holding the same tile
// together.
std::vector<tile> tiles_of(const par::kernel& k, const par::run_case& c,
                           const par::tensor_slot& t) {
  const std::vector<int> dims = k.mesh_dims(c);
  std::map<std::array<std::int64_t, 4>, std::string> held;
  for (int r = 0; r < c.p; ++r) {
    const par::case_plan plan = par::plan_of(k, c, par::coords_of(r, dims));
    const par::block& b = plan[t].region;
    for (const par::index_run& rows : par::runs_of_rows(b))
      for (const par::index_run& cols : par::runs_of_cols(b)) {
        std::string& who =
            held[{rows.offset, rows.offset + rows.length, cols.offset, cols.offset + cols.length}];
        if (!who.empty()) who.push_back(',');
        who.append(std::to_string(r));
      }
  }
  std::vector<tile> out;
  for (const auto& [at, ranks] : held) out.push_back({at[0], at[1], at[2], at[3], ranks});
  return out;
}

// The picture of one output: ratio (rows × cols, NaN where no rank held the element) in bins of
// at most 400 per side, each its largest value, the tiles outlined (up to 256; more are left
// out, and the title says so), drawn by gnuplot into dir/<stem>_error.png.
void draw_errors(const std::filesystem::path& dir, const std::string& stem, const std::string& name,
                 std::int64_t rows, std::int64_t cols, const std::vector<double>& ratio,
                 const std::vector<tile>& tiles) {
  if (rows == 0 || cols == 0) return;
  constexpr std::int64_t most = 400;
  const std::int64_t br = (rows + most - 1) / most, bc = (cols + most - 1) / most;
  const std::int64_t nr = (rows + br - 1) / br, nc = (cols + bc - 1) / bc;
  std::vector<double> bins(static_cast<std::size_t>(nr * nc), NAN);
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) {
      const double v = ratio[static_cast<std::size_t>(i * cols + j)];
      if (std::isnan(v)) continue;
      double& b = bins[static_cast<std::size_t>((i / br) * nc + j / bc)];
      b = std::isnan(b) ? std::min(v, 2.0) : std::max(b, std::min(v, 2.0));
    }
  std::ostringstream data;
  data.precision(6);
  for (std::int64_t i = 0; i < nr; ++i) {
    for (std::int64_t j = 0; j < nc; ++j) {
      const double b = bins[static_cast<std::size_t>(i * nc + j)];
      data << (j == 0 ? "" : " ");
      if (std::isnan(b))
        data << "NaN";
      else
        data << b;
    }
    data << "\n";
  }
  runner::write_file((dir / (stem + "_error.dat")).string(), data.str());
  std::ostringstream gp;
  gp << "set terminal pngcairo size 900,760 noenhanced\n"
     << "set output '" << stem << "_error.png'\n"
     << "set title '" << name << " (" << rows << " x " << cols
     << "): |parallel - reference| / bound, rank blocks outlined"
     << (br * bc > 1 ? ", bins of " + std::to_string(br) + " x " + std::to_string(bc) : "")
     << (tiles.size() > 256 ? ", " + std::to_string(tiles.size()) + " blocks not drawn" : "")
     << "'\n"
     << "set xrange [0:" << cols << "]\nset yrange [" << rows << ":0]\n"
     << "set xlabel 'column'\nset ylabel 'row'\n"
     << "set palette defined (0 '#ffffff', 1 '#f0c000', 1.0001 '#e06000', 2 '#900000')\n"
     << "set cbrange [0:2]\nset cblabel 'error / bound (> 1: out of bound)'\n"
     << "set datafile missing 'NaN'\n"
     << "set object 1000 rect from graph 0,0 to graph 1,1 back fc rgb '#c8c8c8' "
        "fillstyle solid noborder\n";
  if (tiles.size() <= 256) {
    int n = 0;
    for (const tile& t : tiles) {
      ++n;
      gp << "set object " << n << " rect from " << t.c0 << "," << t.r0 << " to " << t.c1 << ","
         << t.r1 << " front fillstyle empty border lc rgb '#3050c0' lw 1.5\n";
      if (tiles.size() <= 64)
        gp << "set label " << n << " '"
           << (t.ranks.find(',') == std::string::npos ? "rank " : "ranks ") << t.ranks << "' at "
           << 0.5 * static_cast<double>(t.c0 + t.c1) << ","
           << 0.5 * static_cast<double>(t.r0 + t.r1) << " center front tc rgb '#3050c0'\n";
    }
  }
  gp << "plot '" << stem << "_error.dat' matrix using (($1+0.5)*" << bc << "):(($2+0.5)*" << br
     << "):3 with image notitle\n";
  if (!cli_tools::run_gnuplot(dir, stem + "_error.gp", gp.str()))
    throw error("gnuplot could not draw " + stem + "_error.png");
}

template <class T>
json write_typed(const par::kernel& k, const par::run_case& c, const values::gathered& g,
                 const std::filesystem::path& dir) {
  const prop::truth<T> t = prop::whole_truth<T>(c);
  const problem& p = c.prob;
  const bool out_in = p.layout == weight_layout::out_in;
  npy::write(dir / "x.npy", t.x.data(), p.M, p.K);
  npy::write(dir / "w.npy", t.w.data(), out_in ? p.N : p.K, out_in ? p.K : p.N);
  npy::write(dir / "dy.npy", t.dy.data(), p.M, p.N);
  const double u = ref::unit_roundoff(p.type);
  json tensors = json::array();
  const char* stems[3] = {"y", "dx", "dw"};
  for (int i = 0; i < 3; ++i) {
    const auto& o = t.out[i];
    const values::gathered_tensor& gt = g.outputs.at(static_cast<std::size_t>(i));
    std::vector<T> par_values(gt.value.size());
    for (std::size_t e = 0; e < par_values.size(); ++e) par_values[e] = static_cast<T>(gt.value[e]);
    const std::string stem = stems[i];
    npy::write(dir / (stem + "_parallel.npy"), par_values.data(), o.rows, o.cols);
    npy::write(dir / (stem + "_reference.npy"), o.reference.data(), o.rows, o.cols);
    npy::write(dir / (stem + "_oracle.npy"), o.oracle.data(), o.rows, o.cols);
    npy::write(dir / (stem + "_magnitude.npy"), o.magnitude.data(), o.rows, o.cols);
    // Judged as verify judges it (prop::judge_block), the rigorous tier: exact mode is bitwise.
    const prop::tolerance tol = prop::tolerance_of(c, g.chains, gt.slot.t, {});
    const std::int64_t k_par = tol.k_par;
    const prop::judgement j = prop::judge_block<T>(
        tol, static_cast<std::size_t>(o.rows), static_cast<std::size_t>(o.cols), par_values.data(),
        o.reference.data(), o.magnitude.data(), nullptr, o.magnitude.data());
    const double worst =
        tol.bitwise ? (j.max_err > 0 ? INFINITY : 0.0) : std::max(0.0, j.worst.rigorous);
    double worst_oracle = 0;
    std::int64_t nonfinite = 0;
    // The picture's values: the rigorous tier's share per element (exact mode: 0 or 2).
    std::vector<double> ratio(par_values.size(), NAN);
    for (std::size_t e = 0; e < par_values.size(); ++e) {
      if (std::isnan(gt.value[e]) && !std::isnan(static_cast<double>(o.reference[e]))) continue;
      const auto got = static_cast<double>(par_values[e]);
      const auto want = static_cast<double>(o.reference[e]);
      const double bound = tol.rigorous * o.magnitude[e], err = std::abs(got - want);
      const bool same = std::memcmp(&par_values[e], &o.reference[e], sizeof(T)) == 0 ||
                        (std::isnan(got) && std::isnan(want));
      ratio[e] = same                                                 ? 0.0
                 : tol.bitwise || !(bound > 0) || !std::isfinite(err) ? 2.0
                                                                      : err / bound;
    }
    if (cli_tools::gnuplot_available())
      draw_errors(dir, stem, gt.name, o.rows, o.cols, ratio, tiles_of(k, c, gt.slot));
    for (std::size_t e = 0; e < par_values.size(); ++e) {
      const double got = par_values[e], m = o.magnitude[e];
      if (!std::isfinite(got)) {
        ++nonfinite;
        continue;
      }
      if (m > 0) worst_oracle = std::max(worst_oracle, std::abs(got - o.oracle[e]) / (u * m));
    }
    tensors.push_back(
        {{"name", gt.name},
         {"stem", stem},
         {"rows", o.rows},
         {"cols", o.cols},
         {"k_par", g.chains_claimed ? json(k_par) : json(nullptr)},
         {"k_ref", o.k_ref},
         {"worst_error_over_bound", std::isfinite(worst) ? json(worst) : json(nullptr)},
         {"within_bound", (g.chains_claimed || c.mode == value_mode::exact) && worst <= 1 &&
                              nonfinite == 0 && j.nonfinite == 0},
         {"worst_error_vs_oracle_u_mag", worst_oracle},
         {"nonfinite", nonfinite},
         {"missing", gt.missing},
         {"replica_conflicts", gt.conflicts}});
  }
  return tensors;
}

}  // namespace

void check_dumpable(const par::run_case& c) {
  if (c.prob.type != dtype::f32 && c.prob.type != dtype::f64)
    throw error("--dump: f32 and f64 cases only; this case is " +
                std::string(to_string(c.prob.type)));
  if (c.prob.layers() != 1)
    throw error(
        "--dump: a single layer's case only (the oracle is a single layer's); this case "
        "has " +
        std::to_string(c.prob.layers()) + " layers");
}

void write_case(const prop::subject& s, const par::run_case& c, par::comm& world,
                const std::string& dir) {
  namespace fs = std::filesystem;
  check_dumpable(c);
  runner::prepare_out_dir("--dump", dir);
  par::comm sub = world.split(world.rank() < c.p ? 0 : -1, world.rank());
  std::string failure;
  values::gathered g;
  if (world.rank() < c.p) {
    try {
      g = values::run_and_gather(s, c, sub);
    } catch (const std::exception& e) {
      failure = std::string("--dump: ") + e.what();
    }
  }
  if (world.rank() == 0 && failure.empty()) {
    try {
      json j;
      j["case"] = c.to_string();
      j["dtype"] = to_string(c.prob.type);
      j["layout"] = to_string(c.prob.layout);
      j["u"] = ref::unit_roundoff(c.prob.type);
      j["exact_mode"] = c.mode == value_mode::exact;
      j["chains_claimed"] = g.chains_claimed;
      j["tensors"] = c.prob.type == dtype::f32 ? write_typed<float>(*s.k, c, g, dir)
                                               : write_typed<double>(*s.k, c, g, dir);
      bool within = true;
      for (const auto& t : j["tensors"]) within = within && t["within_bound"].get<bool>();
      j["within_bound"] = within;
      runner::write_file((fs::path(dir) / "README.txt").string(), readme_text);
      runner::write_file((fs::path(dir) / "case.json").string(), j.dump(2) + "\n");
    } catch (const std::exception& e) {
      failure = std::string("--dump: ") + e.what();
    }
  }
  // A rank of the case that failed told rank 0 in run_and_gather's exchange, so rank 0 knows.
  agree(world.rank() == 0 ? failure : std::string());
}

}  // namespace shardcheck::dump
