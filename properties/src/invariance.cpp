#include "shardcheck/properties/invariance.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <type_traits>
#include <utility>

#include "shardcheck/parallel/comm.hpp"
#include "shardcheck/parallel/plan.hpp"

namespace shardcheck::prop {

namespace {

// A case the kernel takes, or nothing: complete_and_validate's refusal of a variant (or the
// kernel's own exception from mesh_dims, declines, …) only means that setting has no variant
// there. The same on every rank: it reads the case alone.
bool completes(const par::kernel& k, par::run_case& c) {
  try {
    par::complete_and_validate(k, c);
    (void)k.mesh_dims(c);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

std::string parts_text(const par::run_case& c, const par::run_case& base) {
  std::string out;
  for (const auto& [key, part] : c.parts) {
    const auto it = base.parts.find(key);
    if (it != base.parts.end() && it->second == part) continue;
    if (!out.empty()) out += ' ';
    out += "part." + key + "=" + part.to_string();
  }
  return out;
}

// A smaller worker count, the smallest the kernel takes (1 unless it declines it), so that the
// case's replay line, launched on c.p ranks, runs it too; the splits rebalanced, and the
// parameters that factorise p at their fallbacks when the case's values do not divide it. A case
// at p = 1 has none: it is what the others are compared with.
std::optional<variant> other_p(const par::kernel& k, const par::run_case& c) {
  const std::string base = "p=" + std::to_string(c.p);
  for (int q = 1; q < c.p; ++q) {
    par::run_case v = c;
    v.p = q;
    v.parts.clear();
    if (completes(k, v)) return variant{"p=" + std::to_string(q), base, std::move(v)};
    v = c;
    v.p = q;
    v.parts.clear();
    for (const par::param_spec& ps : k.info().params)
      if (ps.divides_p) v.params[ps.name] = ps.fallback;
    if (completes(k, v)) return variant{"p=" + std::to_string(q), base, std::move(v)};
  }
  return std::nullopt;
}

// The splits the kernel's generators draw (not its library's) balanced, or when they are
// balanced, half of the last part of two or more moved to the first.
std::optional<variant> other_partition(const par::kernel& k, const par::run_case& c) {
  if (c.p < 2) return std::nullopt;
  const auto library = k.library_partitions(c);
  par::run_case v = c;
  bool balanced = true;
  for (const auto& [key, part] : c.parts)
    if (!library.contains(key) && part != par::partition::balanced(part.length(), part.parts()))
      balanced = false;
  for (auto& [key, part] : v.parts) {
    if (library.contains(key)) continue;
    if (!balanced) {
      part = par::partition::balanced(part.length(), part.parts());
      continue;
    }
    std::vector<std::int64_t> sizes = part.sizes();
    for (std::size_t j = sizes.size() - 1; j > 0; --j)
      if (sizes[j] >= 2) {
        sizes[0] += sizes[j] / 2;
        sizes[j] -= sizes[j] / 2;
        break;
      }
    part = par::partition(std::move(sizes));
  }
  if (v.parts == c.parts || !completes(k, v)) return std::nullopt;
  std::string setting = parts_text(v, c), base = parts_text(c, v);
  return variant{std::move(setting), std::move(base), std::move(v)};
}

// The other backend; and for a native case, the native backend with its all-reduce and broadcast
// algorithms pinned to the others (ring ↔ tree, binomial tree ↔ chain).
std::vector<variant> other_backends(const par::kernel& k, const par::run_case& c) {
  std::vector<par::backend_spec> specs{par::backend_spec(
      c.backend.kind == par::backend::mpi ? par::backend::native : par::backend::mpi)};
  if (c.backend.kind == par::backend::native) {
    par::algorithm_choice flipped;
    const auto reduce = c.backend.algorithms.of(par::collective::all_reduce);
    flipped.set(par::collective::all_reduce,
                reduce == par::algorithm::tree ? par::algorithm::ring : par::algorithm::tree);
    const auto cast = c.backend.algorithms.of(par::collective::broadcast);
    flipped.set(par::collective::broadcast, cast == par::algorithm::chain
                                                ? par::algorithm::binomial_tree
                                                : par::algorithm::chain);
    specs.emplace_back(par::backend::native, flipped);
  }
  std::vector<variant> out;
  for (par::backend_spec& b : specs) {
    par::run_case v = c;
    v.backend = std::move(b);
    if (completes(k, v))
      out.push_back({"backend=" + par::to_string(v.backend), "backend=" + par::to_string(c.backend),
                     std::move(v)});
  }
  return out;
}

std::optional<variant> other_value(const par::kernel& k, const par::run_case& c,
                                   const std::string& name) {
  const auto& specs = k.info().params;
  const auto spec = std::find_if(specs.begin(), specs.end(),
                                 [&](const par::param_spec& ps) { return ps.name == name; });
  if (spec == specs.end()) return std::nullopt;
  const std::int64_t now = c.param(name);
  for (const std::int64_t value : {spec->fallback, spec->min, spec->max, now + 1, now - 1}) {
    if (value == now || value < spec->min || value > spec->max) continue;
    par::run_case v = c;
    v.params[name] = value;
    if (completes(k, v))
      return variant{name + "=" + std::to_string(value), name + "=" + std::to_string(now),
                     std::move(v)};
  }
  return std::nullopt;
}

// splitmix64's finaliser.
std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// An element's bits (every NaN the same) and its value.
template <class T>
std::pair<std::uint64_t, double> bits_of(const T& x) {
  std::uint64_t bits = 0;
  if (x != x) {  // NaN
    std::memset(&bits, 0xff, sizeof(T));
  } else {
    std::memcpy(&bits, &x, sizeof(T));
  }
  if constexpr (std::is_same_v<T, double>)
    return {bits, x};
  else
    return {bits, static_cast<double>(static_cast<float>(x))};
}

// Visits each counted element of output i on this rank: f(global row, global column, bits, value).
// An output whose matrix is not its block's shape visits nothing: `forward` or `backward` fails
// the case for it, and this rank must still reach the collectives after.
template <class F>
void each_element(const kept_outputs& mine, std::size_t i, F&& f) {
  if (i >= mine.values.size() || !mine.counted[i]) return;
  const par::block& b = mine.blocks[i];
  std::vector<std::int64_t> rows, cols;
  for (const par::index_run& r : par::runs_of_rows(b))
    for (std::int64_t t = 0; t < r.length; ++t) rows.push_back(r.offset + t);
  for (const par::index_run& r : par::runs_of_cols(b))
    for (std::int64_t t = 0; t < r.length; ++t) cols.push_back(r.offset + t);
  std::visit(
      [&](const auto& m) {
        if (m.rows != rows.size() || m.cols != cols.size() || m.data.size() != m.rows * m.cols)
          return;
        for (std::size_t li = 0; li < m.rows; ++li)
          for (std::size_t lj = 0; lj < m.cols; ++lj) {
            const auto [bits, value] = bits_of(m.data[li * m.cols + lj]);
            f(rows[li], cols[lj], bits, value);
          }
      },
      mine.values[i]);
}

// Output i's elements of global row `row` that this rank counts: {column, bits, value bits}.
std::vector<std::uint64_t> row_elements(const kept_outputs& mine, std::size_t i, std::int64_t row) {
  std::vector<std::uint64_t> out;
  each_element(mine, i, [&](std::int64_t r, std::int64_t c, std::uint64_t bits, double value) {
    if (r != row) return;
    std::uint64_t v = 0;
    std::memcpy(&v, &value, sizeof v);
    out.insert(out.end(), {static_cast<std::uint64_t>(c), bits, v});
  });
  return out;
}

// Every rank's `mine` on rank 0 of comm, as {column → (bits, value)}. \note collective over comm.
std::map<std::int64_t, std::pair<std::uint64_t, double>> gather_row(
    const std::vector<std::uint64_t>& mine, MPI_Comm comm) {
  int size = 0, rank = 0;
  MPI_Comm_size(comm, &size);
  MPI_Comm_rank(comm, &rank);
  int n = static_cast<int>(mine.size());
  std::vector<int> counts(static_cast<std::size_t>(size)), displs(counts.size());
  par::check_mpi(MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, comm), "invariance");
  int total = 0;
  for (std::size_t q = 0; q < counts.size(); ++q) {
    displs[q] = total;
    total += counts[q];
  }
  std::vector<std::uint64_t> all(static_cast<std::size_t>(rank == 0 ? total : 0));
  par::check_mpi(MPI_Gatherv(mine.data(), n, MPI_UINT64_T, all.data(), counts.data(), displs.data(),
                             MPI_UINT64_T, 0, comm),
                 "invariance");
  std::map<std::int64_t, std::pair<std::uint64_t, double>> out;
  for (std::size_t e = 0; e + 2 < all.size(); e += 3) {
    double value = 0;
    std::memcpy(&value, &all[e + 2], sizeof value);
    out.try_emplace(static_cast<std::int64_t>(all[e]), all[e + 1], value);
  }
  return out;
}

std::string value_text(const std::pair<std::uint64_t, double>* v) {
  if (v == nullptr) return "nothing";
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.17g (0x%" PRIx64 ")", v->second, v->first);
  return buf;
}

}  // namespace

std::vector<variant> variants_of(const par::kernel& k, const par::run_case& c) {
  const par::invariance_claim& claim = k.info().invariant;
  std::vector<variant> out;
  auto add = [&](std::optional<variant> v) {
    if (v) out.push_back(std::move(*v));
  };
  if (claim.workers) add(other_p(k, c));
  if (claim.partition) add(other_partition(k, c));
  if (claim.backend)
    for (variant& v : other_backends(k, c)) out.push_back(std::move(v));
  for (const std::string& name : claim.params) add(other_value(k, c, name));
  return out;
}

std::vector<output_shape> output_shapes(const par::kernel& k, const par::run_case& c) {
  const par::case_plan plan = par::plan_of(k, c, par::coords_of(0, k.mesh_dims(c)));
  std::vector<output_shape> out;
  for (const par::tensor_slot t : plan.outputs)
    out.push_back({plan[t].name, par::dim_length(c.prob, plan[t].dims.first)});
  return out;
}

std::uint64_t output_digests::of(std::size_t output) const {
  std::uint64_t h = 0x6a09e667f3bcc909ull;
  for (const std::uint64_t r : rows.at(output)) h = mix(h ^ r);
  return h;
}

output_digests digest(const kept_outputs& mine, const std::vector<output_shape>& shapes,
                      MPI_Comm comm) {
  std::vector<std::uint64_t> flat;
  std::vector<std::size_t> start;
  for (const output_shape& s : shapes) {
    start.push_back(flat.size());
    flat.resize(flat.size() + static_cast<std::size_t>(s.rows), 0);
  }
  for (std::size_t i = 0; i < shapes.size(); ++i)
    each_element(mine, i, [&](std::int64_t r, std::int64_t c, std::uint64_t bits, double) {
      flat.at(start[i] + static_cast<std::size_t>(r)) +=
          mix(mix(static_cast<std::uint64_t>(r) << 32 ^ static_cast<std::uint64_t>(c)) ^ bits);
    });
  par::check_mpi(MPI_Allreduce(MPI_IN_PLACE, flat.data(), static_cast<int>(flat.size()),
                               MPI_UINT64_T, MPI_SUM, comm),
                 "output digests");
  output_digests out;
  for (std::size_t i = 0; i < shapes.size(); ++i)
    out.rows.emplace_back(flat.begin() + static_cast<std::ptrdiff_t>(start[i]),
                          flat.begin() + static_cast<std::ptrdiff_t>(start[i]) +
                              static_cast<std::ptrdiff_t>(shapes[i].rows));
  return out;
}

std::string first_difference(const kept_outputs& a, const output_digests& da,
                             const std::string& setting_a, const kept_outputs& b,
                             const output_digests& db, const std::string& setting_b,
                             const std::vector<output_shape>& shapes, MPI_Comm comm) {
  std::size_t output = shapes.size();
  std::int64_t row = -1;
  for (std::size_t i = 0; i < shapes.size() && row < 0; ++i)
    for (std::size_t r = 0; r < da.rows.at(i).size(); ++r)
      if (da.rows[i][r] != db.rows.at(i).at(r)) {
        output = i;
        row = static_cast<std::int64_t>(r);
        break;
      }
  if (row < 0) return {};
  const auto in_a = gather_row(row_elements(a, output, row), comm);
  const auto in_b = gather_row(row_elements(b, output, row), comm);
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  if (rank != 0) return {};
  std::int64_t col = -1;
  for (const auto& [j, v] : in_a) {
    const auto it = in_b.find(j);
    if (it == in_b.end() || it->second.first != v.first) {
      col = j;
      break;
    }
  }
  for (const auto& [j, v] : in_b)
    if (!in_a.contains(j) && (col < 0 || j < col)) col = j;
  const std::string name = shapes[output].name;
  if (col < 0)  // the row's digests differ, its elements do not: a hash collision
    return name + " row " + std::to_string(row) + "'s digest differs between " + setting_a +
           " and " + setting_b + ", its elements do not";
  const auto va = in_a.find(col), vb = in_b.find(col);
  return name + "[i=" + std::to_string(row) + ", j=" + std::to_string(col) + "] is " +
         value_text(va == in_a.end() ? nullptr : &va->second) + " at " + setting_a + " and " +
         value_text(vb == in_b.end() ? nullptr : &vb->second) + " at " + setting_b;
}

}  // namespace shardcheck::prop
