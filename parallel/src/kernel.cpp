#include "shardcheck/parallel/kernel.hpp"

#include <algorithm>
#include <numeric>

#include "shardcheck/reference/mixed.hpp"
#include "shardcheck/reference/stack.hpp"

namespace shardcheck::par {

std::size_t checked_elements(std::size_t r, std::size_t c, std::size_t elem) {
  std::size_t n = 0, bytes = 0;
  if (__builtin_mul_overflow(r, c, &n) || __builtin_mul_overflow(n, elem, &bytes) ||
      bytes > static_cast<std::size_t>(INT64_MAX))
    throw invalid_problem("a " + std::to_string(r) + " × " + std::to_string(c) +
                          " matrix does not fit in 64-bit byte counts");
  return n;
}

any_matrix make_matrix(dtype t, std::size_t rows, std::size_t cols) {
  switch (t) {
    case dtype::f32: return make_matrix<float>(rows, cols);
    case dtype::bf16: return make_matrix<bfloat16_t>(rows, cols);
    case dtype::f16: return make_matrix<half_t>(rows, cols);
    case dtype::f64: break;
  }
  return make_matrix<double>(rows, cols);
}
void throw_not_declared() {
  throw invalid_problem(
      "a bf16 / f16 case reached a kernel's visit: only kernels that declare precision policies "
      "run them, through visit_mixed");
}

std::size_t rows_of(const any_matrix& m) {
  return std::visit([](const auto& v) { return v.rows; }, m);
}
std::size_t cols_of(const any_matrix& m) {
  return std::visit([](const auto& v) { return v.cols; }, m);
}

namespace {
std::pair<std::string, std::string> dim_names(tensor t, weight_layout l) {
  switch (t) {
    case tensor::x:
    case tensor::dx: return {"M", "K"};
    case tensor::y:
    case tensor::dy: return {"M", "N"};
    case tensor::w:
    case tensor::dw:
      return l == weight_layout::out_in ? std::pair<std::string, std::string>{"N", "K"}
                                        : std::pair<std::string, std::string>{"K", "N"};
  }
  return {"?", "?"};
}

// d_j of a stack of L layers: K, H, H2, …, N.
std::string width_name(std::size_t j, std::size_t layers) {
  if (j == 0) return "K";
  if (j == layers) return "N";
  std::string out(1, 'H');
  if (j > 1) out += std::to_string(j);
  return out;
}
}  // namespace

std::pair<std::string, std::string> dim_names(tensor_slot t, const problem& p) {
  if (p.layers() == 1 || (t.t != tensor::w && t.t != tensor::dw)) return dim_names(t.t, p.layout);
  const std::string out = width_name(t.layer + 1, p.layers()), in = width_name(t.layer, p.layers());
  return p.layout == weight_layout::out_in ? std::pair{out, in} : std::pair{in, out};
}

std::vector<tensor_slot> tensors_of(const run_case& c) {
  std::vector<tensor_slot> out{{tensor::x, 0}};
  for (std::size_t l = 0; l < c.prob.layers(); ++l) out.push_back({tensor::w, l});
  out.push_back({tensor::y, 0});
  out.push_back({tensor::dy, 0});
  for (const tensor_slot& o : outputs_of(c))
    if (o.t != tensor::y) out.push_back(o);
  return out;
}

std::vector<tensor_slot> outputs_of(const run_case& c) {
  std::vector<tensor_slot> out{{tensor::y, 0}, {tensor::dx, 0}};
  for (std::size_t l = 0; l < c.prob.layers(); ++l) out.push_back({tensor::dw, l});
  return out;
}

std::string name_of(tensor_slot s, const run_case& c) {
  std::string out(to_string(s.t));
  if (c.prob.layers() > 1 && (s.t == tensor::w || s.t == tensor::dw))
    out += std::to_string(s.layer + 1);
  return out;
}

bool kernel_info::supports(dtype t) const {
  return std::find(dtypes.begin(), dtypes.end(), t) != dtypes.end();
}
bool kernel_info::supports(dtype storage, const precision& p) const {
  return supports(storage) && std::find(policies.begin(), policies.end(), p) != policies.end() &&
         (p.acc == dtype::f32 || p.acc == storage) &&
         (p.reduce == dtype::f32 || p.reduce == storage);
}
bool kernel_info::supports(weight_layout l) const {
  return std::find(layouts.begin(), layouts.end(), l) != layouts.end();
}
bool kernel_info::supports(value_mode m) const {
  return std::find(modes.begin(), modes.end(), m) != modes.end();
}

case_declined::case_declined(const std::string& kernel, std::string reason)
    : invalid_problem(kernel + " declines the case: " + reason), reason_(std::move(reason)) {}

std::string to_string(const preconditions& t) {
  std::vector<std::string> parts;
  if (t.min_p > 1) parts.push_back("p ≥ " + std::to_string(t.min_p));
  if (t.square_p) parts.emplace_back("p a perfect square");
  if (t.power_of_two_p) parts.emplace_back("p a power of two");
  if (t.min_dim > 0) parts.push_back("every dimension ≥ " + std::to_string(t.min_dim));
  for (const auto& [dim, n] : t.min_size) parts.push_back(dim + " ≥ " + std::to_string(n));
  for (const auto& [dim, n] : t.multiple_of)
    parts.push_back(dim + " a multiple of " + std::to_string(n));
  if (t.no_empty_parts) parts.emplace_back("no empty parts");
  std::string out;
  for (const std::string& s : parts) out += (out.empty() ? "" : "; ") + s;
  return out;
}

std::int64_t dim_length(const problem& p, const std::string& name) {
  if (name == "M") return p.M;
  if (name == "N") return p.N;
  if (name == "K") return p.K;
  for (std::size_t j = 1; j < p.layers(); ++j)
    if (name == width_name(j, p.layers())) return p.hidden[j - 1];
  throw invalid_problem("unknown problem dimension '" + name + "'");
}

std::string split_key(const std::string& dim, std::size_t axis, std::size_t axes) {
  return axes > 1 && axis > 0 ? dim + "@" + std::to_string(axis) : dim;
}

std::vector<split> splits_of(const kernel& s, const run_case& c) {
  const auto dims = s.mesh_dims(c);
  std::vector<split> out;
  for (const tensor_slot& t : tensors_of(c)) {
    const layout l = s.placement(t, c);
    if (l.size() != dims.size())
      throw invalid_problem(s.name() + ": layout of " + name_of(t, c) + " has " +
                            std::to_string(l.size()) + " placements for a mesh of " +
                            std::to_string(dims.size()) + " axes");
    const auto names = dim_names(t, c.prob);
    for (std::size_t a = 0; a < l.size(); ++a) {
      if (l[a].what != placement::kind::shard) continue;
      const std::string& dim = l[a].dim == 0 ? names.first : names.second;
      split sp{split_key(dim, a, dims.size()), dim_length(c.prob, dim), dims[a]};
      bool known = false;
      for (const auto& o : out) known = known || o.key == sp.key;
      if (!known) out.push_back(sp);
    }
  }
  for (split& sp : s.extra_splits(c)) out.push_back(std::move(sp));
  return out;
}

block block_of(const kernel& s, const run_case& c, tensor_slot t, std::span<const int> coords) {
  const auto dims = s.mesh_dims(c);
  const layout l = s.placement(t, c);
  const auto names = dim_names(t, c.prob);
  block b{0, dim_length(c.prob, names.first), 0, dim_length(c.prob, names.second)};
  for (std::size_t a = 0; a < l.size(); ++a) {
    if (l[a].what == placement::kind::on && coords[a] != l[a].dim) return block{};
    if (l[a].what == placement::kind::cyclic) {
      const bool rows = l[a].dim == 0;
      std::vector<index_run> runs =
          cyclic_runs(rows ? b.rows : b.cols, l[a].nb, l[a].src, dims[a], coords[a]);
      std::int64_t total = 0;
      for (const index_run& run : runs) total += run.length;
      const std::int64_t first = runs.empty() ? 0 : runs.front().offset;
      if (runs.size() < 2) runs.clear();
      (rows ? b.row0 : b.col0) = first;
      (rows ? b.rows : b.cols) = total;
      (rows ? b.row_runs : b.col_runs) = std::move(runs);
      continue;
    }
    if (l[a].what != placement::kind::shard) continue;
    const bool rows = l[a].dim == 0;
    const partition& part = c.part(split_key(rows ? names.first : names.second, a, dims.size()));
    const int r = coords[a];
    if (rows) {
      b.row0 += part.offset(r);
      b.rows = part.size(r);
    } else {
      b.col0 += part.offset(r);
      b.cols = part.size(r);
    }
  }
  return b;
}

std::vector<index_run> runs_of_rows(const block& b) {
  if (!b.row_runs.empty()) return b.row_runs;
  if (b.rows == 0) return {};
  return {{b.row0, b.rows}};
}

std::vector<index_run> runs_of_cols(const block& b) {
  if (!b.col_runs.empty()) return b.col_runs;
  if (b.cols == 0) return {};
  return {{b.col0, b.cols}};
}

std::int64_t global_index(std::span<const index_run> runs, std::int64_t i) {
  for (const index_run& r : runs) {
    if (i < r.length) return r.offset + i;
    i -= r.length;
  }
  throw invalid_problem("global_index: local index past the runs");
}

std::vector<index_run> cyclic_runs(std::int64_t n, std::int64_t nb, int src, int coords, int r) {
  if (nb < 1 || coords < 1 || src < 0 || src >= coords || r < 0 || r >= coords || n < 0)
    throw invalid_problem("block-cyclic: nb=" + std::to_string(nb) +
                          ", src=" + std::to_string(src) + ", coordinate " + std::to_string(r) +
                          " of " + std::to_string(coords) + " (nb ≥ 1, 0 ≤ src, r < coordinates)");
  const std::int64_t blocks = n / nb + (n % nb != 0 ? 1 : 0);
  constexpr std::int64_t max_blocks = std::int64_t{1} << 24;
  if (blocks > max_blocks)
    throw invalid_problem("block-cyclic: " + std::to_string(n) + " indices in blocks of " +
                          std::to_string(nb) + " make " + std::to_string(blocks) +
                          " blocks, more than 2^24");
  std::vector<index_run> out;
  // Block i lies on coordinate (src + i) mod coords: r's first is (r − src) mod coords.
  for (std::int64_t i = (r - src + coords) % coords; i < blocks; i += coords) {
    const std::int64_t offset = i * nb, length = std::min(nb, n - offset);
    if (!out.empty() && out.back().offset + out.back().length == offset)
      out.back().length += length;
    else
      out.push_back({offset, length});
  }
  return out;
}

namespace {
// Why info().takes declines c by its worker count and dimensions; none if it takes them.
std::optional<std::string> declined_by_shape(const preconditions& t, const run_case& c) {
  const std::string p = "p=" + std::to_string(c.p);
  if (c.p < t.min_p) return p + " is below its minimum " + std::to_string(t.min_p);
  if (t.square_p) {
    int q = 1;
    while (q * q < c.p) ++q;
    if (q * q != c.p) return p + " is not a perfect square";
  }
  if (t.power_of_two_p && (c.p & (c.p - 1)) != 0) return p + " is not a power of two";
  std::vector<std::string> dims{"M", "N", "K"};
  for (std::size_t j = 1; j < c.prob.layers(); ++j) dims.push_back(width_name(j, c.prob.layers()));
  const auto has = [&](const std::string& d) {
    return std::find(dims.begin(), dims.end(), d) != dims.end();
  };
  // M, N, K, H, H2, H3, …: a name no case can have is the kernel's mistake.
  const auto check_name = [](const std::string& d, const char* field) {
    const bool width = d == "H" || (d.size() > 1 && d[0] == 'H' && d[1] != '0' && d != "H1" &&
                                    d.find_first_not_of("0123456789", 1) == std::string::npos);
    if (d != "M" && d != "N" && d != "K" && !width)
      throw invalid_problem(std::string("kernel_info::takes.") + field + " names '" + d +
                            "', which is no dimension (M, N, K, H, H2, …)");
  };
  for (const auto& entry : t.min_size) check_name(entry.first, "min_size");
  for (const auto& entry : t.multiple_of) check_name(entry.first, "multiple_of");
  for (const std::string& d : dims) {
    const std::int64_t n = dim_length(c.prob, d);
    std::int64_t least = t.min_dim;
    if (const auto it = t.min_size.find(d); it != t.min_size.end())
      least = std::max(least, it->second);
    if (n < least)
      return d + "=" + std::to_string(n) + " is below its minimum " + std::to_string(least);
  }
  for (const auto& [d, m] : t.multiple_of) {
    if (m < 1)
      throw invalid_problem("kernel_info::takes.multiple_of." + d + "=" + std::to_string(m) +
                            ": a multiple must be at least 1");
    if (has(d) && dim_length(c.prob, d) % m != 0)
      return d + "=" + std::to_string(dim_length(c.prob, d)) + " is not a multiple of " +
             std::to_string(m);
  }
  return std::nullopt;
}
}  // namespace

std::vector<int> coords_of(int rank, const std::vector<int>& dims) {
  std::vector<int> out(dims.size());
  for (std::size_t a = dims.size(); a-- > 0;) {
    out[a] = rank % dims[a];
    rank /= dims[a];
  }
  return out;
}

void complete_and_validate(const kernel& s, run_case& c) {
  const std::string who = "case for " + s.name() + ": ";
  if (c.p < 1 || c.p > max_parts)
    throw invalid_problem(who + "p=" + std::to_string(c.p) + ": p must be between 1 and " +
                          std::to_string(max_parts));
  c.prob.validate();
  const kernel_info& info = s.info();
  if (!info.supports(c.prob.type))
    throw invalid_problem(who + "dtype " + std::string(to_string(c.prob.type)) +
                          " is not supported");
  if (!info.supports(c.prob.layout))
    throw invalid_problem(who + "layout " + std::string(to_string(c.prob.layout)) +
                          " is not supported");
  if (!info.supports(c.mode))
    throw invalid_problem(who + "mode " + std::string(to_string(c.mode)) + " is not supported");
  if (is_storage16(c.prob.type)) {
    validate_policy(c.prob.type, c.policy);
    if (!info.supports(c.prob.type, c.policy))
      throw invalid_problem(who + "dtype=" + std::string(to_string(c.prob.type)) + " " +
                            to_string(c.policy) + " is not a declared precision policy");
    // f16's largest finite value is 65504: wide data (to 2¹⁷) and cancel's 2¹² terms overflow.
    if (c.prob.type == dtype::f16 && (c.mode == value_mode::wide || c.mode == value_mode::cancel))
      throw invalid_problem(who + "mode " + std::string(to_string(c.mode)) +
                            " overflows f16 (its largest value is 65504)");
  }
  if (c.prob.layers() > info.max_layers)
    throw invalid_problem(who + "a stack of " + std::to_string(c.prob.layers()) +
                          " layers (H=...), but the kernel runs at most " +
                          std::to_string(info.max_layers));
  if (c.prob.layers() < info.min_layers)
    throw invalid_problem(who + std::to_string(c.prob.layers()) +
                          " layer(s), but the kernel needs a stack of at least " +
                          std::to_string(info.min_layers) + " (H=...)");
  // exact mode: values on a grid 2^−g chosen from the contraction lengths (stack.hpp exact_grid;
  // g = 3 for one layer up to K = 2¹⁸ in f32) keep every sum exact; none at all beyond g = 0.
  // bf16 and f16 use coarser values of their own (mixed.hpp exact_limit).
  if (c.mode == value_mode::exact && is_storage16(c.prob.type) && c.prob.layers() > 1) {
    const std::string why = ref::exact_stack_problem({c.prob.layout, c.prob.widths(), c.prob.act},
                                                     c.prob.M, c.prob.type);
    if (!why.empty())
      throw invalid_problem(who + "exact mode would round in " +
                            std::string(to_string(c.prob.type)) + ": " + why);
  } else if (c.mode == value_mode::exact && is_storage16(c.prob.type)) {
    const std::int64_t exact_limit = ref::exact_limit(c.prob.type);
    if (std::max({c.prob.M, c.prob.N, c.prob.K}) > exact_limit)
      throw invalid_problem(who + "exact mode needs M, N, K ≤ " + std::to_string(exact_limit) +
                            " in " + std::string(to_string(c.prob.type)) + " (sums stay exact)");
  } else if (c.mode == value_mode::exact && ref::exact_grid_of(c.prob) < 0) {
    throw invalid_problem(who + "exact mode would round: " +
                          ref::exact_stack_problem({c.prob.layout, c.prob.widths(), c.prob.act},
                                                   c.prob.M, c.prob.type));
  }
  for (const std::string& name : info.invariant.params)
    if (std::none_of(info.params.begin(), info.params.end(),
                     [&](const param_spec& ps) { return ps.name == name; }))
      throw invalid_problem(who + "info().invariant names the parameter '" + name +
                            "', which the kernel does not declare");
  int unfactored = c.p;  // p divided by the divides_p parameters so far
  for (const param_spec& ps : info.params) {
    const auto it = c.params.try_emplace(ps.name, ps.fallback).first;
    if (it->second < ps.min || it->second > ps.max)
      throw invalid_problem(who + ps.name + "=" + std::to_string(it->second) + " is outside [" +
                            std::to_string(ps.min) + ", " + std::to_string(ps.max) + "]");
    if (!ps.divides_p) continue;
    if (it->second < 1 || unfactored % it->second != 0) {
      std::string msg = who + ps.name + "=" + std::to_string(it->second) + " must divide ";
      msg += unfactored == c.p ? "p=" + std::to_string(c.p)
                               : std::to_string(unfactored) + " (p=" + std::to_string(c.p) +
                                     " over the earlier mesh factors)";
      throw invalid_problem(msg);
    }
    unfactored /= static_cast<int>(it->second);
  }
  for (const auto& [key, value] : c.params) {
    bool declared = false;
    for (const param_spec& ps : info.params) declared = declared || ps.name == key;
    if (!declared) throw invalid_problem(who + "unknown parameter '" + key + "'");
  }
  if (auto why = declined_by_shape(info.takes, c)) throw case_declined(s.name(), std::move(*why));
  const auto dims = s.mesh_dims(c);
  const int product = std::accumulate(dims.begin(), dims.end(), 1, std::multiplies<>());
  if (product != c.p)
    throw invalid_problem(who + "mesh does not multiply to p=" + std::to_string(c.p));
  const auto complete = [&](const split& sp) {
    const auto it = c.parts.try_emplace(sp.key, partition::balanced(sp.length, sp.parts)).first;
    if (it->second.parts() != sp.parts || it->second.length() != sp.length)
      throw invalid_problem(who + "part." + sp.key + "=" + it->second.to_string() + " must have " +
                            std::to_string(sp.parts) + " parts summing to " +
                            std::to_string(sp.length));
  };
  // The partitions the library picks: a case may give them only as the library does.
  for (auto& [key, part] : s.library_partitions(c)) {
    const auto [it, added] = c.parts.try_emplace(key, part);
    if (!added && !(it->second == part))
      throw invalid_problem(who + "part." + key + "=" + it->second.to_string() +
                            " contradicts the partition the kernel's library picks, part." + key +
                            "=" + part.to_string());
  }
  // The kernel's own splits first: its placements may read them (a pipeline's stages, part.L).
  for (const split& sp : s.extra_splits(c)) complete(sp);
  const auto needed = splits_of(s, c);
  for (const split& sp : needed) complete(sp);
  for (const auto& [key, value] : c.parts) {
    bool used = false;
    for (const split& sp : needed) used = used || sp.key == key;
    if (!used) throw invalid_problem(who + "partition part." + key + " is not used");
  }
  for (const tensor_slot& t : tensors_of(c)) {
    const layout l = s.placement(t, c);
    for (std::size_t a = 0; a < l.size(); ++a)
      if (l[a].what == placement::kind::on && (l[a].dim < 0 || l[a].dim >= dims[a]))
        throw invalid_problem(who + name_of(t, c) + " is " + l[a].to_string() + " on mesh axis " +
                              std::to_string(a) + " of " + std::to_string(dims[a]) +
                              " coordinates: no rank would hold it");
  }
  for (const tensor_slot& t : outputs_of(c))
    for (const placement& pl : s.placement(t, c))
      if (pl.what == placement::kind::partial)
        throw invalid_problem(who + name_of(t, c) + " is left partial; outputs must be R, S or BC");
  // An input placed P holds a share of each element per coordinate (ref::partial_share), on one
  // axis.
  for (const tensor_slot& t : tensors_of(c)) {
    const layout l = s.placement(t, c);
    if (std::count_if(l.begin(), l.end(),
                      [](const placement& pl) { return pl.what == placement::kind::partial; }) > 1)
      throw invalid_problem(who + name_of(t, c) +
                            " is partial on more than one mesh axis; an input may be P on one");
  }
  // A block-cyclic dimension: a valid block size and source, on that axis alone (a dimension
  // dealt cyclically is sharded on no other axis), and a checked block count (cyclic_runs).
  for (const tensor_slot& t : tensors_of(c)) {
    const layout l = s.placement(t, c);
    const auto names = dim_names(t, c.prob);
    for (std::size_t a = 0; a < l.size(); ++a) {
      if (l[a].what != placement::kind::cyclic) continue;
      const std::string here = who + name_of(t, c) + " is " + l[a].to_string() + " on mesh axis " +
                               std::to_string(a) + " of " + std::to_string(dims[a]) + ": ";
      if (l[a].dim != 0 && l[a].dim != 1) throw invalid_problem(here + "d must be 0 or 1");
      if (l[a].nb < 1) throw invalid_problem(here + "the block size must be at least 1");
      if (l[a].src < 0 || l[a].src >= dims[a])
        throw invalid_problem(here + "src must be a coordinate of the axis");
      for (std::size_t b = 0; b < l.size(); ++b)
        if (b != a && l[b].dim == l[a].dim &&
            (l[b].what == placement::kind::shard || l[b].what == placement::kind::cyclic))
          throw invalid_problem(here + "its dimension is also sharded on axis " +
                                std::to_string(b));
      (void)cyclic_runs(dim_length(c.prob, l[a].dim == 0 ? names.first : names.second), l[a].nb,
                        l[a].src, dims[a], 0);
    }
  }
  if (info.takes.no_empty_parts)
    for (const auto& [key, part] : c.parts)
      for (const std::int64_t size : part.sizes())
        if (size == 0)
          throw case_declined(s.name(),
                              "part." + key + "=" + part.to_string() + " has an empty part");
  if (auto why = s.declines(c)) throw case_declined(s.name(), std::move(*why));
}

}  // namespace shardcheck::par
