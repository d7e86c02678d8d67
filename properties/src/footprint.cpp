#include "shardcheck/properties/footprint.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "shardcheck/parallel/plan.hpp"
#include "shardcheck/properties/invariance.hpp"
#include "shardcheck/properties/verdict.hpp"

namespace shardcheck::prop {

namespace {
using par::tensor;

// checked a·b·c and running sums, each naming what overflowed.
std::int64_t mul3(std::int64_t a, std::int64_t b, std::int64_t c) {
  return checked_mul(checked_mul(a, b, "footprint"), c, "footprint");
}
}  // namespace

namespace {
// rank_footprint, and the bytes of the rank's output blocks to `outputs`.
std::int64_t rank_bytes(const par::kernel& k, const par::run_case& c, std::span<const int> coords,
                        unsigned mask, std::int64_t& outputs) {
  const auto on = [&](property q) { return (mask & static_cast<unsigned>(q)) != 0; };
  // The properties that run the kernel again and keep its outputs beside the first run's.
  const bool again = on(property::determinism) || on(property::memory) || on(property::invariance);
  const par::case_plan plan = par::plan_of(k, c, coords);
  const problem& p = c.prob;
  const auto e = static_cast<std::int64_t>(size_of(p.type));
  std::int64_t blocks = 0, total = 0;
  const auto add = [&](std::int64_t& to, std::int64_t v) { to = checked_add(to, v, "footprint"); };
  // The memory check's re-run at a smaller memory-bounding parameter makes its own inputs while
  // the first run's are held (harness.cpp check_memory).
  bool inputs_again = false;
  for (const par::param_spec& ps : k.info().params)
    inputs_again = inputs_again || (ps.memory_monotone && on(property::memory));
  outputs = 0;
  for (const par::tensor_plan& t : plan.tensors) {
    const std::int64_t bytes = mul3(t.region.rows, t.region.cols, e);
    add(blocks, bytes);
    if (!t.is_input()) add(outputs, bytes);
    if (t.is_input() ? inputs_again : again) add(total, bytes);  // a re-run's second copy
  }
  add(total, blocks);
  if (!on(property::forward) && !on(property::backward)) {
    // No output judged: no reference.
  } else if (p.layers() > 1) {
    // The whole stack's reference on every rank (stack_expect, twice with the statistical tier):
    // X, dY, each W_l and dW_l, each layer's output and gradient, as values, bounds and
    // magnitudes. Per element, from verify's max RSS per rank at 2 ranks (column_row_pair, f64:
    // 80 B per element of the W at 64×4096×4096, H = 2048 → 4096; 65 B per hidden element at
    // 4096×32×32, H = 4096 → 8192, bf16 60 B), with about 20% to spare.
    const std::vector<std::int64_t> d = p.widths();
    std::int64_t rows = checked_add(checked_mul(p.M, p.K, "footprint"),
                                    checked_mul(p.M, p.N, "footprint"), "footprint");
    std::int64_t weights = 0;
    for (std::size_t l = 1; l < d.size(); ++l) {
      add(weights, checked_mul(d[l], d[l - 1], "footprint"));
      if (l + 1 < d.size()) add(rows, checked_mul(p.M, d[l], "footprint"));
    }
    add(total, mul3(weights, 96, 1));
    add(total, mul3(rows, 80, 1));
  } else {
    // The element tier's reference per element: the expected value, its magnitude and, where the
    // data-aware bound applies, its squares. A projected block (verdict.hpp judged_by_projection;
    // values that may hold NaN or Inf can fall back to the element tier) holds instead, in
    // doubles, per row the m vectors' r and g and S, X, Q and G, per inner index the m pairs
    // hi + lo and a, max, and per column the m signs.
    const bool projected = judged_by_projection(c) && c.mode != value_mode::nonfinite &&
                           c.mode != value_mode::zero_inf;
    const std::int64_t per_element = e + 8 + (data_aware_applies(c, false) ? 8 : 0);
    for (const par::tensor_slot& o : plan.outputs) {
      const par::block& b = plan[o].region;
      if (b.rows == 0 || b.cols == 0) continue;
      if (!on(o.t == tensor::y ? property::forward : property::backward)) continue;  // not judged
      const std::int64_t inner = o.t == tensor::y ? p.K : o.t == tensor::dx ? p.N : p.M;
      if (projected) {
        const std::int64_t m = projection_vectors;
        add(total, mul3(b.rows, 2 * m + 4, 8));
        add(total, mul3(inner, 2 * m + 2, 8));
        add(total, mul3(b.cols, m, 8));
      } else {
        add(total, mul3(b.rows, b.cols, per_element));
      }
      // The input panels expect() generates: Y needs X's rows and W's, dX dY's rows and W's,
      // dW the M rows of dY and X in its columns — over the rank's share of the inner dimension
      // when r ranks hold the block (replicated on mesh axes of r ranks in all): data_parallel's
      // dW on p = 4 costs each rank ⌈M/4⌉ rows of dY and X.
      std::int64_t replicas = 1;
      for (std::size_t a = 0; a < plan[o].where.size() && a < plan.dims.size(); ++a)
        if (plan[o].where[a].what == par::placement::kind::replicate) replicas *= plan.dims[a];
      const std::int64_t share = inner / replicas + (inner % replicas != 0 ? 1 : 0);
      add(total, mul3(checked_add(b.rows, b.cols, "footprint"), share, e));
    }
  }
  const par::claims cl = k.cost(c, coords);
  add(total, cl.peak ? std::max(cl.peak->forward, cl.peak->backward) : blocks);
  return total;
}

}  // namespace

std::int64_t rank_footprint(const par::kernel& k, const par::run_case& c,
                            std::span<const int> coords, unsigned mask) {
  std::int64_t outputs = 0;
  return rank_bytes(k, c, coords, mask, outputs);
}

footprint footprint_of(const par::kernel& k, const par::run_case& c, unsigned mask) {
  footprint out;
  const std::vector<int> dims = k.mesh_dims(c);
  std::int64_t kept = 0;  // the largest rank's outputs
  for (int r = 0; r < c.p; ++r) {
    std::int64_t outputs = 0;
    const std::int64_t bytes = rank_bytes(k, c, par::coords_of(r, dims), mask, outputs);
    if (bytes > out.bytes) out = {bytes, r};
    kept = std::max(kept, outputs);
  }
  // Invariance runs each variant of the case (another p, partition, backend or parameter value:
  // invariance.hpp variants_of) after the first run, whose outputs it keeps meanwhile; a variant
  // at p = 1 holds the whole problem on one rank.
  if ((mask & static_cast<unsigned>(property::invariance)) == 0 || !k.info().invariant.any())
    return out;
  std::vector<variant> variants;
  try {
    variants = variants_of(k, c);
  } catch (const std::exception&) {
    return out;  // the property reports a variant it cannot make
  }
  for (const variant& v : variants) {
    const footprint f = footprint_of(k, v.c, 0);
    const std::int64_t bytes = checked_add(kept, f.bytes, "footprint");
    if (bytes > out.bytes) out = {bytes, f.rank};
  }
  return out;
}

namespace {

// The number a cgroup file holds ("max" or a missing file: none, INT64_MAX).
std::int64_t cgroup_value(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return INT64_MAX;
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  return ec == std::errc() && v > 0 ? v : INT64_MAX;
}

// The memory limit of this process's cgroup and of every cgroup above it, the lowest:
// memory.max (cgroup v2) or memory.limit_in_bytes (v1, where "no limit" is a number near 2⁶³).
std::int64_t cgroup_memory_limit() {
  std::ifstream in("/proc/self/cgroup");
  std::int64_t lowest = INT64_MAX;
  for (std::string line; std::getline(in, line);) {
    // "0::/user.slice/…" (v2) or "4:memory:/docker/…" (v1)
    const auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    std::string root, file;
    if (controllers.empty()) {
      root = "/sys/fs/cgroup";
      file = "memory.max";
    } else {
      std::istringstream names(controllers);
      bool memory = false;
      for (std::string n; std::getline(names, n, ',');) memory = memory || n == "memory";
      if (!memory) continue;
      root = "/sys/fs/cgroup/memory";
      file = "memory.limit_in_bytes";
    }
    while (true) {
      lowest = std::min(lowest, cgroup_value(root + path + (path == "/" ? "" : "/") + file));
      if (path.empty() || path == "/") break;
      path = path.substr(0, std::max<std::size_t>(path.rfind('/'), 1));
    }
  }
  return lowest;
}

}  // namespace

std::int64_t default_memory_limit(int ranks_here) {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  std::int64_t machine =
      pages > 0 && page > 0 ? static_cast<std::int64_t>(pages) * page : INT64_MAX;
  // A cgroup (a container, a systemd slice, a batch job) holds the ranks on this node together.
  machine = std::min(machine, cgroup_memory_limit());
  std::int64_t per_rank =
      machine == INT64_MAX ? INT64_MAX : machine / 4 * 3 / std::max(ranks_here, 1);
  // `ulimit -v` bounds each process's address space.
  rlimit as{};
  if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY)
    per_rank = std::min(per_rank, static_cast<std::int64_t>(as.rlim_cur / 4 * 3));
  return per_rank;
}

void check_footprint(const par::kernel& k, const par::run_case& c, std::int64_t limit,
                     unsigned mask) {
  const footprint f = footprint_of(k, c, mask);
  if (f.bytes <= limit) return;
  throw invalid_problem("case for " + k.name() + " needs " + human_bytes(f.bytes) + " on rank " +
                        std::to_string(f.rank) +
                        " (harness buffers, reference and the kernel's claimed peak), above the "
                        "memory limit of " +
                        human_bytes(limit) + " per rank (--memory-limit)");
}

std::int64_t default_memory_limit_here() {
  MPI_Comm here = MPI_COMM_NULL;
  par::check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &here),
                 "ranks on this node");
  int n = 1;
  MPI_Comm_size(here, &n);
  MPI_Comm_free(&here);
  return default_memory_limit(n);
}

std::int64_t parse_bytes(const std::string& text, std::string_view option) {
  const char* end = text.data() + text.size();
  double number = 0;
  const auto [rest, ec] = std::from_chars(text.data(), end, number);
  std::string unit(rest, end);
  unit.erase(0, unit.find_first_not_of(' '));
  static const std::map<std::string, double, std::less<>> units = {
      {"", 1},         {"B", 1},       {"K", 0x1p10},   {"KB", 0x1p10}, {"KiB", 0x1p10},
      {"M", 0x1p20},   {"MB", 0x1p20}, {"MiB", 0x1p20}, {"G", 0x1p30},  {"GB", 0x1p30},
      {"GiB", 0x1p30}, {"T", 0x1p40},  {"TB", 0x1p40},  {"TiB", 0x1p40}};
  const auto u = units.find(unit);
  const double bytes = u == units.end() ? 0 : number * u->second;
  if (ec != std::errc() || rest == text.data() || u == units.end() || !std::isfinite(bytes) ||
      bytes < 1 || bytes >= 0x1p63)
    throw invalid_problem(std::string(option) + " '" + text +
                          "': a byte count from 1 B to below 8 EiB, e.g. 2GiB, 512M or 1000000");
  return static_cast<std::int64_t>(bytes);
}

std::string human_bytes(std::int64_t b) {
  char buf[64];
  const auto v = static_cast<double>(b);
  if (b < 1024)
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(b));
  else if (b < (std::int64_t{1} << 20))
    std::snprintf(buf, sizeof buf, "%.1f KiB", v / 1024);
  else if (b < (std::int64_t{1} << 30))
    std::snprintf(buf, sizeof buf, "%.1f MiB", v / (1 << 20));
  else
    std::snprintf(buf, sizeof buf, "%.1f GiB", v / (1 << 30));
  return buf;
}

}  // namespace shardcheck::prop
