#include "shardcheck/properties/harness.hpp"

#include <cmath>
#include <cstring>
#include <sstream>
#include <variant>

#include "shardcheck/parallel/memory.hpp"
#include "shardcheck/reference/bound.hpp"
#include "shardcheck/reference/check.hpp"
#include "shardcheck/reference/data.hpp"
#include "shardcheck/reference/gemm.hpp"
#include "shardcheck/reference/stack.hpp"

namespace shardcheck::prop {

using par::any_matrix;
using par::block;
using par::matrix;
using par::tensor;
using par::tensor_slot;

std::string_view to_string(property p) {
  switch (p) {
    case property::runs: return "runs";
    case property::forward: return "forward";
    case property::backward: return "backward";
    case property::ledger: return "ledger";
    case property::memory: return "memory";
    case property::determinism: return "determinism";
    case property::replicas: return "replicas";
  }
  return "?";
}

unsigned parse_properties(std::string_view s) {
  if (s == "all") return all_properties;
  unsigned mask = static_cast<unsigned>(property::runs);
  std::size_t pos = 0;
  while (pos <= s.size()) {
    const std::size_t comma = s.find(',', pos);
    const std::string_view name = s.substr(pos, comma == s.npos ? s.npos : comma - pos);
    bool found = name == "runs";
    for (property p : checked_properties)
      if (to_string(p) == name) {
        mask |= static_cast<unsigned>(p);
        found = true;
      }
    if (!found)
      throw invalid_problem("unknown property '" + std::string(name) +
                            "' (known: runs, forward, backward, ledger, memory, determinism, "
                            "replicas)");
    if (comma == s.npos) break;
    pos = comma + 1;
  }
  return mask;
}

std::string properties_to_string(unsigned mask) {
  std::string out;
  for (property p : checked_properties) {
    if ((mask & static_cast<unsigned>(p)) == 0) continue;
    if (!out.empty()) out += ',';
    out += to_string(p);
  }
  return out.empty() ? std::string(to_string(property::runs)) : out;
}

namespace {

// The data of each input: X, W_1 (the single layer's W), W_2 (ref::tensor_id::w2), W_l for l ≥ 3
// (ids 8 + l, past every named id), dY.
std::uint32_t id_of(tensor_slot t) {
  switch (t.t) {
    case tensor::x: return static_cast<std::uint32_t>(ref::tensor_id::x);
    case tensor::w:
      if (t.layer == 0) return static_cast<std::uint32_t>(ref::tensor_id::w);
      if (t.layer == 1) return static_cast<std::uint32_t>(ref::tensor_id::w2);
      return static_cast<std::uint32_t>(8 + t.layer + 1);
    default: return static_cast<std::uint32_t>(ref::tensor_id::dy);
  }
}

template <class T>
matrix<T> generate(const par::run_case& c, tensor_slot t, std::int64_t row0, std::int64_t rows,
                   std::int64_t col0, std::int64_t cols) {
  matrix<T> m(static_cast<std::size_t>(rows), static_cast<std::size_t>(cols));
  ref::fill_block<T>(c.mode, c.seed, id_of(t), static_cast<std::uint64_t>(row0),
                     static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(col0),
                     static_cast<std::uint64_t>(cols), m.data.data());
  return m;
}

any_matrix generate_block(const par::run_case& c, tensor_slot t, const block& b) {
  if (c.prob.type == dtype::f32) return generate<float>(c, t, b.row0, b.rows, b.col0, b.cols);
  return generate<double>(c, t, b.row0, b.rows, b.col0, b.cols);
}

struct expectation {
  any_matrix value;
  std::vector<double> mag;
  std::int64_t k_ref = 0;
};

// The reference for block b of output t, from exactly the inputs it depends on.
template <class T>
expectation expect(const par::run_case& c, tensor t, const block& b) {
  const auto& p = c.prob;
  const bool out_in = p.layout == weight_layout::out_in;
  const auto rows = static_cast<std::size_t>(b.rows), cols = static_cast<std::size_t>(b.cols);
  expectation e;
  e.value = par::make_matrix<T>(rows, cols);
  e.mag.assign(rows * cols, 0.0);
  T* out = std::get<matrix<T>>(e.value).data.data();
  if (t == tensor::y) {
    const auto x = generate<T>(c, tensor::x, b.row0, b.rows, 0, p.K);
    const auto w = out_in ? generate<T>(c, tensor::w, b.col0, b.cols, 0, p.K)
                          : generate<T>(c, tensor::w, 0, p.K, b.col0, b.cols);
    const auto k = static_cast<std::size_t>(p.K);
    ref::linear_forward<T>(p.layout, rows, cols, k, x.data.data(), w.data.data(), out);
    ref::magnitude_forward<T>(p.layout, rows, cols, k, x.data.data(), w.data.data(), e.mag.data());
    e.k_ref = p.K;
  } else if (t == tensor::dx) {
    const auto dy = generate<T>(c, tensor::dy, b.row0, b.rows, 0, p.N);
    const auto w = out_in ? generate<T>(c, tensor::w, 0, p.N, b.col0, b.cols)
                          : generate<T>(c, tensor::w, b.col0, b.cols, 0, p.N);
    const auto n = static_cast<std::size_t>(p.N);
    ref::linear_backward_dx<T>(p.layout, rows, n, cols, dy.data.data(), w.data.data(), out);
    ref::magnitude_backward_dx<T>(p.layout, rows, n, cols, dy.data.data(), w.data.data(),
                                  e.mag.data());
    e.k_ref = p.N;
  } else {
    // out_in: dW block is (N rows) × (K cols) = dY[:, rows]ᵀ · X[:, cols];
    // in_out: (K rows) × (N cols) = X[:, rows]ᵀ · dY[:, cols].
    const std::int64_t n0 = out_in ? b.row0 : b.col0, nn = out_in ? b.rows : b.cols;
    const std::int64_t k0 = out_in ? b.col0 : b.row0, kk = out_in ? b.cols : b.rows;
    const auto dy = generate<T>(c, tensor::dy, 0, p.M, n0, nn);
    const auto x = generate<T>(c, tensor::x, 0, p.M, k0, kk);
    const auto m = static_cast<std::size_t>(p.M);
    const auto n_out = static_cast<std::size_t>(nn), k_in = static_cast<std::size_t>(kk);
    ref::linear_backward_dw<T>(p.layout, m, n_out, k_in, dy.data.data(), x.data.data(), out);
    ref::magnitude_backward_dw<T>(p.layout, m, n_out, k_in, dy.data.data(), x.data.data(),
                                  e.mag.data());
    e.k_ref = p.M;
  }
  return e;
}

// The reference of a whole stack (L > 1) — every row of X and dY, so every output — and, per
// element, its bound (stack.hpp) for the strategy's chains per layer. Y's and dX's rows are
// independent, so the blocks of a rank's outputs are all slices of it: computed once per case
// and rank, whatever the number of layers.
template <class T>
ref::stack_expectation<T> expect_whole_stack(const par::run_case& c,
                                             const par::cost_estimate& cost) {
  const auto& p = c.prob;
  const ref::stack_shape shape{p.layout, p.widths(), p.act};
  const auto x = generate<T>(c, {tensor::x, 0}, 0, p.M, 0, p.K);
  const auto dy = generate<T>(c, {tensor::dy, 0}, 0, p.M, 0, p.N);
  std::vector<matrix<T>> ws;
  std::vector<const T*> w_ptrs;
  for (std::size_t l = 0; l < shape.layers(); ++l) {
    const bool out_in = p.layout == weight_layout::out_in;
    const auto out = static_cast<std::int64_t>(shape.width(l + 1));
    const auto in = static_cast<std::int64_t>(shape.width(l));
    ws.push_back(generate<T>(c, {tensor::w, l}, 0, out_in ? out : in, 0, out_in ? in : out));
  }
  for (const auto& w : ws) w_ptrs.push_back(w.data.data());
  ref::stack_chains chains;
  for (const par::chain_lengths& l : cost.layer_chains) {
    chains.h.push_back(l.y);
    chains.da.push_back(l.dx);
    chains.dw.push_back(l.dw);
  }
  // stack_expect reads a null dY as "forward only": an empty dY (no rows or N = 0) is not null.
  const T none{};
  const T* dy_ptr = dy.data.empty() ? &none : dy.data.data();
  return ref::stack_expect<T>(shape, static_cast<std::size_t>(p.M), x.data.data(), w_ptrs, dy_ptr,
                              chains, p.type);
}

// Block b of stack output t, sliced from the whole stack's reference.
template <class T>
expectation expect_stack(const par::run_case& c, tensor_slot t, const block& b,
                         const ref::stack_expectation<T>& all) {
  const auto& p = c.prob;
  const std::vector<T>& value = t.t == tensor::y ? all.y : t.t == tensor::dx ? all.dx
                                                                             : all.dw[t.layer];
  const std::vector<double>& bound = t.t == tensor::y    ? all.y_bound
                                     : t.t == tensor::dx ? all.dx_bound
                                                         : all.dw_bound[t.layer];
  const auto full_cols =
      static_cast<std::size_t>(par::dim_length(p, par::dim_names(t, p).second));
  const auto br = static_cast<std::size_t>(b.rows), bc = static_cast<std::size_t>(b.cols);
  expectation e;
  e.value = par::make_matrix<T>(br, bc);
  e.mag.assign(br * bc, 0.0);
  T* out = std::get<matrix<T>>(e.value).data.data();
  for (std::size_t i = 0; i < br; ++i)
    for (std::size_t j = 0; j < bc; ++j) {
      const std::size_t at = (static_cast<std::size_t>(b.row0) + i) * full_cols +
                             static_cast<std::size_t>(b.col0) + j;
      out[i * bc + j] = value[at];
      e.mag[i * bc + j] = bound[at];
    }
  return e;
}

// A stack's whole reference, computed the first time one of a rank's blocks needs it.
struct stack_reference {
  std::variant<std::monostate, ref::stack_expectation<float>, ref::stack_expectation<double>> all;
  template <class T>
  const ref::stack_expectation<T>& get(const par::run_case& c, const par::cost_estimate& cost) {
    if (!std::holds_alternative<ref::stack_expectation<T>>(all))
      all = expect_whole_stack<T>(c, cost);
    return std::get<ref::stack_expectation<T>>(all);
  }
};

std::int64_t chain_of(const par::cost_estimate& cost, tensor t) {
  return t == tensor::y ? cost.chains.y : t == tensor::dx ? cost.chains.dx : cost.chains.dw;
}

std::string where(const std::string& t, const block& b, int rank,
                  const std::vector<int>& coords, std::size_t li, std::size_t lj) {
  std::ostringstream os;
  os << t << "[i=" << b.row0 + static_cast<std::int64_t>(li)
     << ", j=" << b.col0 + static_cast<std::int64_t>(lj) << "] on rank " << rank;
  if (coords.size() > 1) {
    os << " (coords";
    for (int v : coords) os << ' ' << v;
    os << ')';
  }
  os << " at local (" << li << ", " << lj << ")";
  return os.str();
}

// Judges output t on this rank; returns an empty string when it passes. Updates worst_error.
template <class T>
std::string judge(const par::run_case& c, tensor_slot t, const block& b, const any_matrix& got_any,
                  const par::cost_estimate& cost, stack_reference& whole, int rank,
                  const std::vector<int>& coords, double& worst_error) {
  const auto& got = std::get<matrix<T>>(got_any);
  const std::string name = par::name_of(t, c);
  if (static_cast<std::int64_t>(got.rows) != b.rows ||
      static_cast<std::int64_t>(got.cols) != b.cols) {
    std::ostringstream os;
    os << name << " on rank " << rank << " is " << got.rows << "×" << got.cols
       << ", its placement says " << b.rows << "×" << b.cols;
    return os.str();
  }
  if (b.rows == 0 || b.cols == 0) return {};  // nothing here (e.g. another stage's tensor)
  const bool stack = c.prob.layers() > 1;
  const expectation e =
      stack ? expect_stack<T>(c, t, b, whole.get<T>(c, cost)) : expect<T>(c, t.t, b);
  const auto& want = std::get<matrix<T>>(e.value);
  const auto rows = got.rows, cols = got.cols;
  ref::compare_options opt;
  opt.bitwise = c.mode == value_mode::exact;
  opt.mag_is_bound = stack;
  opt.k_par = stack ? 0 : chain_of(cost, t.t);
  opt.k_ref = e.k_ref;
  opt.k_mag = e.k_ref;
  const double u = ref::unit_roundoff(c.prob.type);
  // A stack's bound is no magnitude product: its elements stay out of worst_error.
  for (std::size_t i = 0; i < rows * cols && !stack; ++i) {
    const double g = got.data[i], w = want.data[i];
    if (std::isfinite(g) && std::isfinite(w) && e.mag[i] > 0)
      worst_error = std::max(worst_error, std::abs(g - w) / (u * e.mag[i]));
  }
  const auto bad = ref::compare_block<T>(rows, cols, got.data.data(), cols, want.data.data(), cols,
                                         e.mag.data(), cols, opt);
  if (!bad) return {};
  std::ostringstream os;
  os.precision(17);
  os << where(name, b, rank, coords, bad->row, bad->col) << ": got " << bad->got
     << ", expected " << bad->expected;
  if (opt.bitwise) os << " (exact mode: bitwise equality required)";
  else if (stack) os << ", stack bound " << bad->bound << ", error = " << bad->ratio << "·bound";
  else os << ", bound " << bad->bound << " (k_par=" << opt.k_par << ", k_ref=" << opt.k_ref
          << "), error = " << bad->ratio << "·u·mag";
  if (!bad->reason.empty()) os << " [" << bad->reason << "]";
  return os.str();
}

struct run_result {
  any_matrix y, dx;
  std::vector<any_matrix> dws;  // dW_1 … dW_L
  std::vector<par::ledger_entry> log;
  std::int64_t peak_forward = 0, peak_backward = 0;
  [[nodiscard]] const any_matrix& out(tensor_slot t) const {
    return t.t == tensor::y ? y : t.t == tensor::dx ? dx : dws.at(t.layer);
  }
};

// Runs forward and backward once, measuring each phase's peak. The ledger is sized for what the
// cost model predicts before the measured scopes open, so recording allocates nothing in them.
run_result run_once(const par::strategy& s, const par::run_case& c, par::mesh& grid,
                    const rank_inputs& in, const par::cost_estimate& cost) {
  run_result r;
  r.dws.resize(in.ws.size());
  par::ledger log;
  log.reserve(cost.forward.size() + cost.backward.size());
  grid.attach(&log, true);
  par::context ctx{grid, log};
  log.set_phase(par::phase::forward);
  {
    mem::peak_scope scope;
    s.forward_layers(ctx, c, in.x, in.ws, r.y);
    r.peak_forward = static_cast<std::int64_t>(scope.peak());
  }
  log.set_phase(par::phase::backward);
  {
    mem::peak_scope scope;
    s.backward_layers(ctx, c, in.x, in.ws, in.dy, r.dx, r.dws);
    r.peak_backward = static_cast<std::int64_t>(scope.peak());
  }
  grid.attach(nullptr, false);
  r.log = log.entries();
  return r;
}

std::string compare_ledger(const std::vector<par::ledger_entry>& got,
                           const par::cost_estimate& cost, int rank) {
  std::vector<par::ledger_entry> want;
  for (auto [when, list] : {std::pair{par::phase::forward, &cost.forward},
                            std::pair{par::phase::backward, &cost.backward}})
    for (par::ledger_entry e : *list) {
      e.when = when;
      want.push_back(e);
    }
  const std::size_t n = std::max(got.size(), want.size());
  for (std::size_t i = 0; i < n; ++i) {
    if (i < got.size() && i < want.size() && got[i] == want[i]) continue;
    std::ostringstream os;
    os << "rank " << rank << ", collective #" << i << ": recorded "
       << (i < got.size() ? par::to_string(got[i]) : "nothing") << "; cost model says "
       << (i < want.size() ? par::to_string(want[i]) : "nothing") << " (" << got.size()
       << " recorded, " << want.size() << " predicted)";
    return os.str();
  }
  return {};
}

std::uint64_t hash_bits(const any_matrix& m) {
  return std::visit(
      [](const auto& v) {
        std::uint64_t h = 1469598103934665603ull ^ (v.rows * 0x9e3779b97f4a7c15ull) ^ v.cols;
        const auto* bytes = reinterpret_cast<const unsigned char*>(v.data.data());
        for (std::size_t i = 0; i < v.data.size() * sizeof(v.data[0]); ++i)
          h = (h ^ bytes[i]) * 1099511628211ull;
        return h;
      },
      m);
}

// First local index at which a and b differ bitwise, or -1.
std::int64_t first_difference(const any_matrix& a, const any_matrix& b) {
  if (a.index() != b.index() || par::rows_of(a) != par::rows_of(b) ||
      par::cols_of(a) != par::cols_of(b))
    return 0;
  return std::visit(
      [&](const auto& va) -> std::int64_t {
        const auto& vb = std::get<std::decay_t<decltype(va)>>(b);
        for (std::size_t i = 0; i < va.data.size(); ++i)
          if (std::memcmp(&va.data[i], &vb.data[i], sizeof(va.data[i])) != 0)
            return static_cast<std::int64_t>(i);
        return -1;
      },
      a);
}

}  // namespace

rank_inputs inputs_of(const par::strategy& s, const par::run_case& c,
                      std::span<const int> coords) {
  rank_inputs in;
  for (const tensor_slot& t : par::tensors_of(c)) {
    if (t.t != tensor::x && t.t != tensor::w && t.t != tensor::dy) continue;
    any_matrix m = generate_block(c, t, par::block_of(s, c, t, coords));
    if (t.t == tensor::x) in.x = std::move(m);
    else if (t.t == tensor::dy) in.dy = std::move(m);
    else in.ws.push_back(std::move(m));
  }
  return in;
}

verdict run_on_rank(const par::strategy& s, const par::run_case& c, par::comm& case_comm,
                    unsigned mask) {
  verdict v;
  const int rank = case_comm.rank();
  auto fail = [&](property p, const std::string& msg) {
    const auto bit = static_cast<unsigned>(p);
    if ((v.failed & bit) != 0) return;
    v.failed |= bit;
    if (v.message.empty()) v.message = std::string(to_string(p)) + ": " + msg;
  };
  auto on = [&](property p) { return (mask & static_cast<unsigned>(p)) != 0; };

  // Replica agreement needs every rank's hashes; every rank takes part even after a failure.
  constexpr std::size_t fields = 5;
  const std::vector<tensor_slot> outputs = par::outputs_of(c);
  std::vector<std::uint64_t> mine(outputs.size() * fields, 0);
  try {
    par::mesh grid(case_comm, s.mesh_dims(c));
    grid.set_backend(c.backend);
    const std::vector<int> coords = grid.coords();
    const par::cost_estimate cost = s.cost(c, coords);
    const rank_inputs in = inputs_of(s, c, coords);

    const run_result first = run_once(s, c, grid, in, cost);
    stack_reference whole;
    for (const tensor_slot& t : outputs) {
      const property p = t.t == tensor::y ? property::forward : property::backward;
      if (!on(p)) continue;
      const block b = par::block_of(s, c, t, coords);
      const std::string bad =
          c.prob.type == dtype::f32
              ? judge<float>(c, t, b, first.out(t), cost, whole, rank, coords, v.worst_error)
              : judge<double>(c, t, b, first.out(t), cost, whole, rank, coords, v.worst_error);
      if (!bad.empty()) fail(p, bad);
    }
    if (on(property::ledger)) {
      const std::string bad = compare_ledger(first.log, cost, rank);
      if (!bad.empty()) fail(property::ledger, bad);
    }
    if (on(property::memory)) {
      const std::pair<std::int64_t, std::int64_t> phases[] = {
          {first.peak_forward, cost.peak_forward}, {first.peak_backward, cost.peak_backward}};
      for (std::size_t i = 0; i < 2; ++i) {
        const auto [peak, bound] = phases[i];
        const double ratio = bound > 0 ? static_cast<double>(peak) / static_cast<double>(bound)
                                       : (peak > 0 ? INFINITY : 0.0);
        if (ratio >= v.worst_memory) {
          v.worst_memory = ratio;
          v.peak_bytes = peak;
          v.bound_bytes = bound;
        }
        if (peak > bound)
          fail(property::memory, std::string(i == 0 ? "forward" : "backward") + " on rank " +
                                     std::to_string(rank) + " allocated a peak of " +
                                     std::to_string(peak) + " bytes; the cost model's bound is " +
                                     std::to_string(bound) + " bytes");
      }
      // A memory-monotone parameter (e.g. a bucket size): the same case with a smaller value,
      // drawn from the case's seed so that a replay repeats it, must not peak higher.
      for (const par::param_spec& ps : s.params()) {
        const std::int64_t value = c.param(ps.name);
        if (!ps.memory_monotone || value <= ps.min) continue;
        par::run_case smaller = c;
        smaller.params[ps.name] =
            ps.min + static_cast<std::int64_t>(c.seed % static_cast<std::uint64_t>(value - ps.min));
        par::complete_and_validate(s, smaller);
        const run_result other = run_once(s, smaller, grid, inputs_of(s, smaller, coords),
                                          s.cost(smaller, coords));
        const std::int64_t peaks[2][2] = {{first.peak_forward, other.peak_forward},
                                          {first.peak_backward, other.peak_backward}};
        for (std::size_t i = 0; i < 2; ++i)
          if (peaks[i][1] > peaks[i][0])
            fail(property::memory,
                 std::string(i == 0 ? "forward" : "backward") + " on rank " +
                     std::to_string(rank) + " peaks at " + std::to_string(peaks[i][1]) +
                     " bytes with " + ps.name + "=" + std::to_string(smaller.param(ps.name)) +
                     ", above its " + std::to_string(peaks[i][0]) + " bytes with " + ps.name +
                     "=" + std::to_string(value) + " (a smaller " + ps.name +
                     " must never raise the peak)");
      }
    }
    if (on(property::determinism)) {
      const run_result second = run_once(s, c, grid, in, cost);
      for (const tensor_slot& t : outputs) {
        const std::int64_t at = first_difference(first.out(t), second.out(t));
        if (at < 0) continue;
        const auto cols = static_cast<std::int64_t>(std::max<std::size_t>(par::cols_of(first.out(t)), 1));
        fail(property::determinism,
             par::name_of(t, c) + " on rank " + std::to_string(rank) +
                 " differs between two runs of the same case at local (" +
                 std::to_string(at / cols) + ", " + std::to_string(at % cols) + ")");
        break;
      }
    }
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      const block b = par::block_of(s, c, outputs[i], coords);
      const std::uint64_t desc[fields] = {1, static_cast<std::uint64_t>(b.row0),
                                          static_cast<std::uint64_t>(b.rows),
                                          static_cast<std::uint64_t>(b.col0) << 32 |
                                              static_cast<std::uint64_t>(b.cols),
                                          hash_bits(first.out(outputs[i]))};
      std::copy(desc, desc + fields, mine.begin() + static_cast<std::ptrdiff_t>(i * fields));
    }
  } catch (const std::exception& e) {
    fail(property::runs, e.what());
  }

  if (on(property::replicas)) {
    std::vector<std::uint64_t> all(mine.size() * static_cast<std::size_t>(case_comm.size()));
    par::check_mpi(MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_UINT64_T,
                                 all.data(), static_cast<int>(mine.size()), MPI_UINT64_T,
                                 case_comm.native_handle()),
                   "replica exchange");
    for (int q = 0; q < case_comm.size() && (v.failed & static_cast<unsigned>(property::replicas)) == 0; ++q) {
      if (q == rank) continue;
      for (std::size_t i = 0; i < outputs.size(); ++i) {
        const std::uint64_t* a = mine.data() + i * fields;
        const std::uint64_t* b = all.data() + (static_cast<std::size_t>(q) * outputs.size() + i) * fields;
        if (a[0] == 0 || b[0] == 0) continue;  // a rank that failed to run holds nothing
        if (std::equal(a, a + 4, b) && a[4] != b[4]) {
          fail(property::replicas, par::name_of(outputs[i], c) + " rows " +
                                       std::to_string(a[1]) + "+" + std::to_string(a[2]) +
                                       " is replicated on ranks " + std::to_string(rank) +
                                       " and " + std::to_string(q) + " with different bits");
          break;
        }
      }
    }
  }
  return v;
}

}  // namespace shardcheck::prop
