#include "dump.hpp"

#include <mpi.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "npy.hpp"
#include "runner.hpp"
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
    "A parallel value no rank held is NaN (case.json counts them as missing).\n";

template <class T>
json write_typed(const par::run_case& c, const values::gathered& g,
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
      j["tensors"] = c.prob.type == dtype::f32 ? write_typed<float>(c, g, dir)
                                               : write_typed<double>(c, g, dir);
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
