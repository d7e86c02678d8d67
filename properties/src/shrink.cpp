#include "shardcheck/properties/shrink.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <utility>

namespace shardcheck::prop {

namespace {
using par::partition;
using par::run_case;

// `from` with `parts` parts summing to `length`, kept as close to it as can be: empty parts
// removed (the last first), then the last parts merged into the one before, then cut at
// `length`. 0,2,0,1 → 3 parts: 0,2,1; → 1 part: 3; 3,0,4 cut at 5: 3,0,2. nullopt where the
// partition would have to grow (more parts, a longer dimension).
std::optional<partition> refit(const partition& from, std::int64_t length, int parts) {
  std::vector<std::int64_t> sizes = from.sizes();
  if (parts < 1 || static_cast<int>(sizes.size()) < parts || from.length() < length)
    return std::nullopt;
  for (std::size_t i = sizes.size(); i-- > 0 && static_cast<int>(sizes.size()) > parts;)
    if (sizes[i] == 0) sizes.erase(sizes.begin() + static_cast<std::ptrdiff_t>(i));
  while (static_cast<int>(sizes.size()) > parts) {
    const std::int64_t last = sizes.back();
    sizes.pop_back();
    sizes.back() += last;
  }
  std::int64_t at = 0;
  for (std::int64_t& s : sizes) {
    const std::int64_t kept = std::clamp<std::int64_t>(length - at, 0, s);
    at += s;
    s = kept;
  }
  return partition(std::move(sizes));
}

// d with its partitions refitted from `old` to the splits k needs now (balanced where none
// fits, the library's where it picks them), completed and validated; nullopt if k rejects or
// declines it.
std::optional<run_case> settle(const par::kernel& k, run_case d,
                               const std::map<std::string, partition>& old) {
  try {
    d.parts.clear();
    const std::map<std::string, partition> chosen = k.library_partitions(d);
    for (const par::split& sp : par::splits_of(k, d))
      if (const auto it = old.find(sp.key); it != old.end() && !chosen.contains(sp.key))
        if (auto fitted = refit(it->second, sp.length, sp.parts))
          d.parts.emplace(sp.key, std::move(*fitted));
    par::complete_and_validate(k, d);
  } catch (const invalid_problem&) {
    return std::nullopt;
  }
  return d;
}

// 0, 1, v/2, v − 1: those below v.
std::vector<std::int64_t> smaller_values(std::int64_t v) {
  std::vector<std::int64_t> out;
  for (std::int64_t w : {std::int64_t{0}, std::int64_t{1}, v / 2, v - 1})
    if (w < v && std::find(out.begin(), out.end(), w) == out.end()) out.push_back(w);
  return out;
}

// The candidates, in order, as they are collected: each kept once, c itself never.
class collector {
 public:
  collector(const run_case& c, const par::kernel& k) : c_(c), k_(k) { seen_.insert(c.to_string()); }
  // d settled with its partitions refitted from c's (or from `old`).
  void add(const run_case& d) { add(d, c_.parts); }
  void add(const run_case& d, const std::map<std::string, partition>& old) {
    if (auto s = settle(k_, d, old)) keep(std::move(*s));
  }
  // Whether d was valid (and so kept, if new).
  bool try_add(const run_case& d) {
    auto s = settle(k_, d, c_.parts);
    if (!s) return false;
    keep(std::move(*s));
    return true;
  }
  std::vector<run_case> take() { return std::move(out_); }

 private:
  void keep(run_case d) {
    if (seen_.insert(d.to_string()).second) out_.push_back(std::move(d));
  }
  const run_case& c_;
  const par::kernel& k_;
  std::set<std::string> seen_;
  std::vector<run_case> out_;
};

// The width slots of a problem: M, N, K, then each hidden width.
std::vector<std::int64_t*> widths_of(problem& p) {
  std::vector<std::int64_t*> out{&p.M, &p.N, &p.K};
  for (std::int64_t& h : p.hidden) out.push_back(&h);
  return out;
}

// How simple a mode is: exact, then uniform, then the others alike.
int mode_rank(value_mode m) {
  return m == value_mode::exact ? 0 : m == value_mode::uniform ? 1 : 2;
}
}  // namespace

std::vector<run_case> simpler(const run_case& c, const par::kernel& k, const case_pins& pins) {
  const par::kernel_info& info = k.info();
  collector out(c, k);

  // Fewer workers: 1, p/2, p − 1; the mesh factors re-derived, partitions refitted, then
  // balanced.
  if (!pins.p)
    for (int q : {1, c.p / 2, c.p - 1}) {
      if (q < 1 || q >= c.p) continue;
      run_case d = c;
      d.p = q;
      int unfactored = q;
      for (const par::param_spec& ps : info.params) {
        if (!ps.divides_p) continue;
        auto& v = d.params[ps.name];
        if (!pins.params.contains(ps.name))
          v = std::gcd(std::max<std::int64_t>(v, 1), std::int64_t{unfactored});
        if (v >= 1 && unfactored % v == 0) unfactored /= static_cast<int>(v);
      }
      out.add(d);
      out.add(d, {});
    }

  // A stack one layer shorter (its last hidden width removed).
  if (!c.prob.hidden.empty() && c.prob.layers() > info.min_layers) {
    run_case d = c;
    d.prob.hidden.pop_back();
    if (d.prob.hidden.empty()) d.prob.act = activation::identity;
    out.add(d);
  }

  // A smaller dimension: M, N, K (inside their pins), each hidden width; partitions cut at the
  // new length.
  const std::optional<dim_range> dim_pins[3] = {pins.m, pins.n, pins.k};
  for (std::size_t i = 0; i < 3 + c.prob.hidden.size(); ++i) {
    run_case probe = c;
    const std::int64_t v = *widths_of(probe.prob)[i];
    std::vector<std::int64_t> values = smaller_values(v);
    if (i < 3 && dim_pins[i]) {  // inside the pin, its bottom and halfway there too, in order
      const std::int64_t lo = dim_pins[i]->lo;
      std::erase_if(values, [&](std::int64_t w) { return w < lo || w > dim_pins[i]->hi; });
      for (const std::int64_t w : {lo, lo + (v - lo) / 2})
        if (w < v && std::find(values.begin(), values.end(), w) == values.end())
          values.push_back(w);
      std::sort(values.begin(), values.end());
    }
    for (std::int64_t w : values) {
      run_case e = c;
      *widths_of(e.prob)[i] = w;
      out.add(e);
    }
  }

  if (c.prob.act != activation::identity && !c.prob.hidden.empty()) {
    run_case d = c;
    d.prob.act = activation::identity;
    out.add(d);
  }

  // exact mode; a stack whose exact sums would round in f32 runs in f64, as generated.
  if (c.mode != value_mode::exact && info.supports(value_mode::exact)) {
    run_case d = c;
    d.mode = value_mode::exact;
    if (!out.try_add(d) && c.prob.layers() > 1 && c.prob.type == dtype::f32 &&
        info.supports(dtype::f64)) {
      d.prob.type = dtype::f64;
      out.add(d);
    }
  }
  if (mode_rank(c.mode) > mode_rank(value_mode::uniform) && info.supports(value_mode::uniform)) {
    run_case d = c;
    d.mode = value_mode::uniform;
    out.add(d);
  }

  // 16-bit storage and its policy: f32 (no policy) where the kernel runs it, else the f32
  // reduction.
  if (is_storage16(c.prob.type)) {
    run_case d = c;
    d.prob.type = dtype::f32;
    d.policy = {};
    if (!info.supports(dtype::f32) || !out.try_add(d)) {
      d = c;
      d.policy = par::f32_policy;
      if (!(d.policy == c.policy)) out.add(d);
    }
  }

  if (c.backend != par::backend::mpi && !pins.backend) {
    run_case d = c;
    d.backend = par::backend::mpi;
    out.add(d);
  }
  if (!c.backend.algorithms.empty() && !pins.backend) {  // native with its default algorithms
    run_case d = c;
    d.backend.algorithms = {};
    out.add(d);
  }

  for (const par::param_spec& ps : info.params) {
    if (pins.params.contains(ps.name) || c.param(ps.name) == ps.fallback) continue;
    run_case d = c;
    d.params[ps.name] = ps.fallback;
    out.add(d);
  }

  for (const auto& [key, part] : c.parts) {
    if (part == partition::balanced(part.length(), part.parts())) continue;
    run_case d = c;
    d.parts.erase(key);
    out.add(d, d.parts);
  }

  if (c.seed != 0) {
    run_case d = c;
    d.seed = 0;
    out.add(d);
  }
  return out.take();
}

local_minimum shrink_to_local_minimum(const run_case& c, const par::kernel& k,
                                      const case_pins& pins, shrink_budget budget,
                                      const std::function<bool(const run_case&)>& fails) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  local_minimum out{c};
  while (true) {
    bool moved = false;
    for (run_case& d : simpler(out.c, k, pins)) {
      if (out.runs >= budget.runs ||
          std::chrono::duration<double>(clock::now() - start).count() >= budget.seconds)
        return out;
      ++out.runs;
      if (!fails(d)) continue;
      out.c = std::move(d);
      moved = true;
      break;
    }
    if (!moved) break;
  }
  out.reached = true;
  return out;
}

}  // namespace shardcheck::prop
