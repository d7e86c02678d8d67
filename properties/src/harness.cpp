#include "shardcheck/properties/harness.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <variant>

#include "shardcheck/parallel/memory.hpp"
#include "shardcheck/parallel/pmpi.hpp"
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

// The local matrix of input t over the given runs of global rows and columns, packed in order:
// rows {0,2},{4,2} × cols {0,3} are global rows 0, 1, 4, 5 of columns 0-2. Throws
// invalid_problem when its size does not fit in memory's index range.
template <class T>
matrix<T> generate(const par::run_case& c, tensor_slot t, std::span<const par::index_run> rows,
                   std::span<const par::index_run> cols) {
  std::int64_t nr = 0, nc = 0;
  for (const par::index_run& r : rows) nr += r.length;
  for (const par::index_run& r : cols) nc += r.length;
  if (nc > 0 && nr > static_cast<std::int64_t>(SIZE_MAX / sizeof(T)) / nc)
    throw invalid_problem(par::name_of(t, c) + " block of " + std::to_string(nr) + "×" +
                          std::to_string(nc) + " elements is too large to allocate");
  matrix<T> m(static_cast<std::size_t>(nr), static_cast<std::size_t>(nc));
  std::vector<T> tile;
  const int grid = c.mode == value_mode::exact ? std::max(ref::exact_grid_of(c.prob), 0) : 3;
  std::size_t i0 = 0;
  for (const par::index_run& r : rows) {
    std::size_t j0 = 0;
    for (const par::index_run& q : cols) {
      const auto tr = static_cast<std::size_t>(r.length), tc = static_cast<std::size_t>(q.length);
      const bool direct = cols.size() == 1;  // the tile is whole rows of m
      if (!direct) tile.resize(tr * tc);
      T* at = direct ? m.row(i0) : tile.data();
      ref::fill_block<T>(c.mode, c.seed, par::data_id_of(t), static_cast<std::uint64_t>(r.offset),
                         tr, static_cast<std::uint64_t>(q.offset), tc, at, 0, grid);
      if (!direct)
        for (std::size_t i = 0; i < tr; ++i)
          std::copy(tile.begin() + static_cast<std::ptrdiff_t>(i * tc),
                    tile.begin() + static_cast<std::ptrdiff_t>((i + 1) * tc), m.row(i0 + i) + j0);
      j0 += tc;
    }
    i0 += static_cast<std::size_t>(r.length);
  }
  return m;
}

// One run [0, n) (none when n = 0).
std::vector<par::index_run> whole(std::int64_t n) {
  if (n == 0) return {};
  return {{0, n}};
}

template <class T>
matrix<T> generate(const par::run_case& c, tensor_slot t, std::int64_t row0, std::int64_t rows,
                   std::int64_t col0, std::int64_t cols) {
  const par::index_run r{row0, rows}, q{col0, cols};
  return generate<T>(c, t, std::span(&r, rows > 0 ? 1 : 0), std::span(&q, cols > 0 ? 1 : 0));
}

any_matrix generate_block(const par::run_case& c, const par::tensor_plan& t) {
  const auto rows = par::runs_of_rows(t.region), cols = par::runs_of_cols(t.region);
  if (c.prob.type == dtype::f32) return generate<float>(c, t.slot, rows, cols);
  return generate<double>(c, t.slot, rows, cols);
}

struct expectation {
  any_matrix value;
  std::vector<double> mag;  // |X||W|ᵀ; a stack's rigorous bound
  std::int64_t k_ref = 0;
  // A stack's: its statistical bound (empty when the tier is off) and its magnitude product.
  std::vector<double> stat_bound, stack_mag;
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
  const auto b_rows = par::runs_of_rows(b), b_cols = par::runs_of_cols(b);
  if (t == tensor::y) {
    const auto x = generate<T>(c, tensor::x, b_rows, whole(p.K));
    const auto w = out_in ? generate<T>(c, tensor::w, b_cols, whole(p.K))
                          : generate<T>(c, tensor::w, whole(p.K), b_cols);
    const auto k = static_cast<std::size_t>(p.K);
    ref::linear_forward<T>(p.layout, rows, cols, k, x.data.data(), w.data.data(), out);
    ref::magnitude_forward<T>(p.layout, rows, cols, k, x.data.data(), w.data.data(), e.mag.data());
    e.k_ref = p.K;
  } else if (t == tensor::dx) {
    const auto dy = generate<T>(c, tensor::dy, b_rows, whole(p.N));
    const auto w = out_in ? generate<T>(c, tensor::w, whole(p.N), b_cols)
                          : generate<T>(c, tensor::w, b_cols, whole(p.N));
    const auto n = static_cast<std::size_t>(p.N);
    ref::linear_backward_dx<T>(p.layout, rows, n, cols, dy.data.data(), w.data.data(), out);
    ref::magnitude_backward_dx<T>(p.layout, rows, n, cols, dy.data.data(), w.data.data(),
                                  e.mag.data());
    e.k_ref = p.N;
  } else {
    // out_in: dW block is (N rows) × (K cols) = dY[:, rows]ᵀ · X[:, cols];
    // in_out: (K rows) × (N cols) = X[:, rows]ᵀ · dY[:, cols].
    const auto& n_runs = out_in ? b_rows : b_cols;
    const auto& k_runs = out_in ? b_cols : b_rows;
    const std::int64_t nn = out_in ? b.rows : b.cols, kk = out_in ? b.cols : b.rows;
    const auto dy = generate<T>(c, tensor::dy, whole(p.M), n_runs);
    const auto x = generate<T>(c, tensor::x, whole(p.M), k_runs);
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
                                             std::span<const par::chain_lengths> layer_chains,
                                             double lambda) {
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
  for (const par::chain_lengths& l : layer_chains) {
    chains.h.push_back(l.y);
    chains.da.push_back(l.dx);
    chains.dw.push_back(l.dw);
  }
  // stack_expect reads a null dY as "forward only": an empty dY (no rows or N = 0) is not null.
  const T none{};
  const T* dy_ptr = dy.data.empty() ? &none : dy.data.data();
  ref::stack_expectation<T> e = ref::stack_expect<T>(shape, static_cast<std::size_t>(p.M),
                                                     x.data.data(), w_ptrs, dy_ptr, chains, p.type);
  if (lambda > 0) {
    // The statistical tier's bounds: the same induction with γ̃ (stack.hpp).
    ref::stack_expectation<T> st =
        ref::stack_expect<T>(shape, static_cast<std::size_t>(p.M), x.data.data(), w_ptrs, dy_ptr,
                             chains, p.type, lambda);
    e.y_stat_bound = std::move(st.y_bound);
    e.dx_stat_bound = std::move(st.dx_bound);
    e.dw_stat_bound = std::move(st.dw_bound);
  }
  return e;
}

// Block b of stack output t, sliced from the whole stack's reference.
template <class T>
expectation expect_stack(const par::run_case& c, tensor_slot t, const block& b,
                         const ref::stack_expectation<T>& all) {
  const auto& p = c.prob;
  const std::vector<T>& value = t.t == tensor::y    ? all.y
                                : t.t == tensor::dx ? all.dx
                                                    : all.dw[t.layer];
  const std::vector<double>& bound = t.t == tensor::y    ? all.y_bound
                                     : t.t == tensor::dx ? all.dx_bound
                                                         : all.dw_bound[t.layer];
  const std::vector<double>& mag = t.t == tensor::y    ? all.y_mag
                                   : t.t == tensor::dx ? all.dx_mag
                                                       : all.dw_mag[t.layer];
  const bool stat = !all.y_stat_bound.empty() || !all.dw_stat_bound.empty();  // M = 0: no Y
  const std::vector<double>& stat_bound = !stat               ? all.y_stat_bound
                                          : t.t == tensor::y  ? all.y_stat_bound
                                          : t.t == tensor::dx ? all.dx_stat_bound
                                                              : all.dw_stat_bound[t.layer];
  const auto full_cols = static_cast<std::size_t>(par::dim_length(p, par::dim_names(t, p).second));
  const auto br = static_cast<std::size_t>(b.rows), bc = static_cast<std::size_t>(b.cols);
  expectation e;
  e.value = par::make_matrix<T>(br, bc);
  e.mag.assign(br * bc, 0.0);
  e.stack_mag.assign(br * bc, 0.0);
  if (stat) e.stat_bound.assign(br * bc, 0.0);
  T* out = std::get<matrix<T>>(e.value).data.data();
  const auto b_rows = par::runs_of_rows(b), b_cols = par::runs_of_cols(b);
  for (std::size_t i = 0; i < br; ++i)
    for (std::size_t j = 0; j < bc; ++j) {
      const auto gi = par::global_index(b_rows, static_cast<std::int64_t>(i));
      const auto gj = par::global_index(b_cols, static_cast<std::int64_t>(j));
      const std::size_t at =
          static_cast<std::size_t>(gi) * full_cols + static_cast<std::size_t>(gj);
      out[i * bc + j] = value[at];
      e.mag[i * bc + j] = bound[at];
      e.stack_mag[i * bc + j] = mag[at];
      if (stat) e.stat_bound[i * bc + j] = stat_bound[at];
    }
  return e;
}

// A stack's whole reference, computed the first time one of a rank's blocks needs it.
struct stack_reference {
  std::variant<std::monostate, ref::stack_expectation<float>, ref::stack_expectation<double>> all;
  template <class T>
  const ref::stack_expectation<T>& get(const par::run_case& c,
                                       std::span<const par::chain_lengths> chains, double lambda) {
    if (!std::holds_alternative<ref::stack_expectation<T>>(all))
      all = expect_whole_stack<T>(c, chains, lambda);
    return std::get<ref::stack_expectation<T>>(all);
  }
};

std::int64_t chain_of(const par::chain_lengths& l, tensor t) {
  return t == tensor::y ? l.y : t == tensor::dx ? l.dx : l.dw;
}

std::string where(const std::string& t, const block& b, int rank, const std::vector<int>& coords,
                  std::size_t li, std::size_t lj) {
  std::ostringstream os;
  os << t << "[i=" << par::global_index(par::runs_of_rows(b), static_cast<std::int64_t>(li))
     << ", j=" << par::global_index(par::runs_of_cols(b), static_cast<std::int64_t>(lj))
     << "] on rank " << rank;
  if (coords.size() > 1) {
    os << " (coords";
    for (int v : coords) os << ' ' << v;
    os << ')';
  }
  os << " at local (" << li << ", " << lj << ")";
  return os.str();
}

// The chains of case c's layers, or zeros when the kernel claims none (then only exact mode, which
// is bitwise and needs no chain, is judged).
std::vector<par::chain_lengths> chains_or_zero(const par::claims& cl, const par::run_case& c) {
  if (cl.chains) return *cl.chains;
  return std::vector<par::chain_lengths>(c.prob.layers());
}

// The statistical tier of case c (bound.hpp): λ from the case's rounding events
// (statistical_events), so that a correct kernel fails it with probability ≤ statistical_p_fail,
// and that probability. λ = 0 (off): exact mode (bitwise) or no chains claimed.
struct statistical_tier {
  double lambda = 0, p_fail = 0;
};
statistical_tier statistical_tier_of(const par::run_case& c,
                                     std::span<const par::chain_lengths> chains, bool forward,
                                     bool backward, bool claimed) {
  if (c.mode == value_mode::exact || !claimed || chains.empty()) return {};
  const double events = statistical_events(c, chains, forward, backward);
  const double u = ref::unit_roundoff(c.prob.type);
  statistical_tier st;
  st.lambda = ref::lambda_for(events, ref::statistical_p_fail, u);
  st.p_fail = ref::false_alarm(events, st.lambda, u);
  return st;
}

// Judges output t on this rank; returns an empty string when it passes. Updates the error
// figures (and worst_error, their largest err/u·mag).
template <class T>
std::string judge(const par::run_case& c, const par::tensor_plan& t, const any_matrix& got_any,
                  std::span<const par::chain_lengths> chains, stack_reference& whole, int rank,
                  const std::vector<int>& coords, const statistical_tier& tier, verdict& v) {
  const auto& got = std::get<matrix<T>>(got_any);
  const block& b = t.region;
  if (static_cast<std::int64_t>(got.rows) != b.rows ||
      static_cast<std::int64_t>(got.cols) != b.cols) {
    std::ostringstream os;
    os << t.name << " on rank " << rank << " is " << got.rows << "×" << got.cols
       << ", its placement says " << b.rows << "×" << b.cols;
    return os.str();
  }
  if (b.rows == 0 || b.cols == 0) return {};  // nothing here (e.g. another stage's tensor)
  const bool stack = c.prob.layers() > 1;
  const expectation e = stack ? expect_stack<T>(c, t.slot, b, whole.get<T>(c, chains, tier.lambda))
                              : expect<T>(c, t.slot.t, b);
  const auto& want = std::get<matrix<T>>(e.value);
  const auto rows = got.rows, cols = got.cols;
  ref::compare_options opt;
  opt.bitwise = c.mode == value_mode::exact;
  opt.mag_is_bound = stack;
  opt.k_par = stack ? 0 : chain_of(chains.front(), t.slot.t);
  opt.k_ref = e.k_ref;
  opt.k_mag = e.k_ref;
  opt.lambda = stack ? 0 : tier.lambda;
  opt.stat_bound = stack && !e.stat_bound.empty() ? e.stat_bound.data() : nullptr;
  const double u = ref::unit_roundoff(c.prob.type);
  // The figures: error in u·mag, and the share of each tier's bound used.
  error_cell& cell = v.errors.at(c.prob.type, t.slot.t, c.mode);
  const auto share = [](double err, double bound) {
    return err == 0 ? 0.0 : bound > 0 ? err / bound : INFINITY;
  };
  // Each tier's bound per unit of mag, once per block (element_bound is this times mag, but for
  // the last rounding: good enough for a share).
  const double per_mag_rig =
      stack ? 0 : ref::element_bound(1.0, opt.k_par, opt.k_ref, c.prob.type, opt.k_mag);
  const double per_mag_stat =
      stack || tier.lambda <= 0
          ? 0
          : ref::element_bound(1.0, opt.k_par, opt.k_ref, c.prob.type, opt.k_mag, tier.lambda);
  for (std::size_t i = 0; i < rows * cols; ++i) {
    const double g = got.data[i], w = want.data[i];
    if (!std::isfinite(g) || !std::isfinite(w)) continue;
    const double err = std::abs(g - w);
    const double mag = stack ? e.stack_mag[i] : e.mag[i];
    if (mag > 0) cell.err_u_mag = std::max(cell.err_u_mag, err / (u * mag));
    if (opt.bitwise) continue;
    const double rigorous = stack ? e.mag[i] : per_mag_rig * e.mag[i];
    cell.rigorous = std::max(cell.rigorous, share(err, rigorous));
    if (tier.lambda <= 0 || (stack && e.stat_bound.empty())) continue;
    const double stat = stack ? e.stat_bound[i] : per_mag_stat * e.mag[i];
    cell.statistical = std::max(cell.statistical, share(err, stat));
  }
  v.worst_error = std::max(v.worst_error, cell.err_u_mag);
  const auto bad = ref::compare_block<T>(rows, cols, got.data.data(), cols, want.data.data(), cols,
                                         e.mag.data(), cols, opt);
  if (!bad) return {};
  std::ostringstream os;
  os.precision(17);
  os << where(t.name, b, rank, coords, bad->row, bad->col) << ": got " << bad->got << ", expected "
     << bad->expected;
  if (opt.bitwise) {
    os << " (exact mode: bitwise equality required)";
  } else if (bad->reason == "statistical") {
    os.precision(3);
    os << ", statistical bound " << bad->bound << " (λ=" << tier.lambda;
    if (!stack) os << ", k_par=" << opt.k_par << ", k_ref=" << opt.k_ref;
    os << "), error = " << bad->ratio << "·bound; within the rigorous bound, above the "
       << "statistical one, which a correct kernel exceeds on a case with probability ≤ "
       << tier.p_fail << " (independent mean-zero rounding errors)";
  } else if (stack) {
    os << ", stack bound " << bad->bound << ", error = " << bad->ratio << "·bound";
  } else {
    os << ", bound " << bad->bound << " (k_par=" << opt.k_par << ", k_ref=" << opt.k_ref
       << "), error = " << bad->ratio << "·u·mag";
  }
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

// The mesh's communicators as a recording window tracks them: the whole mesh as axis −1, each
// axis as itself.
std::vector<par::pmpi::tracked_comm> raw_comms(par::mesh& grid) {
  std::vector<par::pmpi::tracked_comm> out{{grid.all().native_handle(), -1}};
  for (int a = 0; a < static_cast<int>(grid.dims().size()); ++a)
    out.push_back({grid.axis(a).native_handle(), a});
  return out;
}

// Runs forward and backward once, measuring each phase's peak. The ledger is sized for what the
// kernel claims before the measured scopes open, so recording allocates nothing in them. The
// kernel's raw MPI calls on the mesh's communicators are recorded into the same ledger (pmpi.hpp).
run_result run_once(const par::kernel& k, const par::run_case& c, par::mesh& grid,
                    const rank_inputs& in, const par::claims& cl) {
  run_result r;
  r.dws.resize(in.ws.size());
  par::ledger log;
  if (cl.collectives) log.reserve(cl.collectives->forward.size() + cl.collectives->backward.size());
  grid.attach(&log, true);
  const par::pmpi::recording raw(log, true, raw_comms(grid));
  par::context ctx{grid};
  log.set_phase(par::phase::forward);
  {
    mem::peak_scope scope;
    k.forward(ctx, c, par::forward_io{in.x, in.ws, r.y});
    r.peak_forward = static_cast<std::int64_t>(scope.peak());
  }
  log.set_phase(par::phase::backward);
  {
    mem::peak_scope scope;
    k.backward(ctx, c, par::backward_io{in.x, in.ws, in.dy, r.dx, r.dws});
    r.peak_backward = static_cast<std::int64_t>(scope.peak());
  }
  grid.attach(nullptr, false);
  r.log = log.entries();
  return r;
}

std::string compare_ledger(const std::vector<par::ledger_entry>& got,
                           const par::claims::collective_claim& claim, int rank) {
  std::vector<par::ledger_entry> want;
  for (auto [when, list] : {std::pair{par::phase::forward, &claim.forward},
                            std::pair{par::phase::backward, &claim.backward}})
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

// One case on one rank: what every property reads, and the verdict they write.
struct case_run {
  const subject& s;
  const par::run_case& c;
  unsigned mask;
  int rank = 0;
  verdict v;

  [[nodiscard]] bool on(property p) const { return (mask & static_cast<unsigned>(p)) != 0; }
  void fail(property p, const std::string& msg) {
    const auto bit = static_cast<unsigned>(p);
    if ((v.failed & bit) != 0) return;
    v.failed |= bit;
    if (v.message.empty()) v.message = std::string(to_string(p)) + ": " + msg;
  }
  void not_claimed(property p) { v.not_claimed |= static_cast<unsigned>(p); }
  void not_measured(property p) { v.not_measured |= static_cast<unsigned>(p); }
};

// forward, backward: every output block of this rank against the reference.
void check_outputs(case_run& run, const par::case_plan& plan, const par::claims& cl,
                   const run_result& got) {
  const par::run_case& c = run.c;
  const bool judgeable = cl.chains.has_value() || c.mode == value_mode::exact;
  const std::vector<par::chain_lengths> chains = chains_or_zero(cl, c);
  const statistical_tier tier = statistical_tier_of(
      c, chains, run.on(property::forward), run.on(property::backward), cl.chains.has_value());
  stack_reference whole;
  for (const tensor_slot& t : plan.outputs) {
    const property p = t.t == tensor::y ? property::forward : property::backward;
    if (!run.on(p)) continue;
    if (!judgeable) {
      run.not_claimed(p);
      continue;
    }
    const par::tensor_plan& tp = plan[t];
    const std::string bad =
        c.prob.type == dtype::f32
            ? judge<float>(c, tp, got.out(t), chains, whole, run.rank, plan.coords, tier, run.v)
            : judge<double>(c, tp, got.out(t), chains, whole, run.rank, plan.coords, tier, run.v);
    if (!bad.empty()) run.fail(p, bad);
  }
}

// ledger: the recorded collectives and messages equal the claimed ones, entry for entry.
void check_ledger(case_run& run, const par::claims& cl, const run_result& got) {
  for (const par::ledger_entry& e : got.log) run.v.recorded_sent += e.bytes_sent;
  if (!run.on(property::ledger)) return;
  if (!cl.collectives) return run.not_claimed(property::ledger);
  const std::string bad = compare_ledger(got.log, *cl.collectives, run.rank);
  if (bad.empty()) return;
  run.fail(property::ledger, par::pmpi::linked() ? bad
                                                 : bad +
                                                       " (this program does not link "
                                                       "shardcheck::pmpi: raw MPI calls are "
                                                       "not recorded)");
}

// memory: each phase's measured peak within the claimed bound; a memory-monotone parameter (e.g. a
// bucket size) set smaller, drawn from the case's seed so that a replay repeats it, never peaks
// higher. Without the new hook only matrix<T> buffers are counted: a peak above the bound still
// fails (the whole peak is larger still), anything else is `not measured`, never a pass.
void check_memory(case_run& run, par::mesh& grid, const par::case_plan& plan, const par::claims& cl,
                  const run_result& first) {
  if (!run.on(property::memory)) return;
  if (!cl.peak) return run.not_claimed(property::memory);
  const par::kernel& k = *run.s.k;
  const par::run_case& c = run.c;
  const std::pair<std::int64_t, std::int64_t> phases[] = {{first.peak_forward, cl.peak->forward},
                                                          {first.peak_backward, cl.peak->backward}};
  for (std::size_t i = 0; i < 2; ++i) {
    const auto [peak, bound] = phases[i];
    const double ratio = bound > 0 ? static_cast<double>(peak) / static_cast<double>(bound)
                                   : (peak > 0 ? INFINITY : 0.0);
    if (ratio >= run.v.worst_memory) {
      run.v.worst_memory = ratio;
      run.v.peak_bytes = peak;
      run.v.bound_bytes = bound;
    }
    if (peak > bound)
      run.fail(property::memory, std::string(i == 0 ? "forward" : "backward") + " on rank " +
                                     std::to_string(run.rank) + " allocated a peak of " +
                                     std::to_string(peak) + " bytes; the cost model's bound is " +
                                     std::to_string(bound) + " bytes");
  }
  if (!mem::global_new_tracked()) {
    if ((run.v.failed & static_cast<unsigned>(property::memory)) == 0)
      run.not_measured(property::memory);
    return;
  }
  for (const par::param_spec& ps : k.info().params) {
    const std::int64_t value = c.param(ps.name);
    if (!ps.memory_monotone || value <= ps.min) continue;
    par::run_case smaller = c;
    smaller.params[ps.name] =
        ps.min + static_cast<std::int64_t>(c.seed % static_cast<std::uint64_t>(value - ps.min));
    par::complete_and_validate(k, smaller);
    const par::case_plan small_plan = par::plan_of(k, smaller, plan.coords);
    const run_result other =
        run_once(k, smaller, grid, inputs_of(small_plan, smaller), k.cost(smaller, plan.coords));
    const std::int64_t peaks[2][2] = {{first.peak_forward, other.peak_forward},
                                      {first.peak_backward, other.peak_backward}};
    for (std::size_t i = 0; i < 2; ++i)
      if (peaks[i][1] > peaks[i][0])
        run.fail(property::memory, std::string(i == 0 ? "forward" : "backward") + " on rank " +
                                       std::to_string(run.rank) + " peaks at " +
                                       std::to_string(peaks[i][1]) + " bytes with " + ps.name +
                                       "=" + std::to_string(smaller.param(ps.name)) +
                                       ", above its " + std::to_string(peaks[i][0]) +
                                       " bytes with " + ps.name + "=" + std::to_string(value) +
                                       " (a smaller " + ps.name + " must never raise the peak)");
  }
}

// determinism: a second run of the same case gives the same bits.
void check_determinism(case_run& run, par::mesh& grid, const par::case_plan& plan,
                       const rank_inputs& in, const par::claims& cl, const run_result& first) {
  if (!run.on(property::determinism)) return;
  const run_result second = run_once(*run.s.k, run.c, grid, in, cl);
  for (const tensor_slot& t : plan.outputs) {
    const std::int64_t at = first_difference(first.out(t), second.out(t));
    if (at < 0) continue;
    const auto cols =
        static_cast<std::int64_t>(std::max<std::size_t>(par::cols_of(first.out(t)), 1));
    run.fail(property::determinism, plan[t].name + " on rank " + std::to_string(run.rank) +
                                        " differs between two runs of the same case at local (" +
                                        std::to_string(at / cols) + ", " +
                                        std::to_string(at % cols) + ")");
    return;
  }
}

// A tiled block's runs folded into the block's description (0 for a contiguous block).
std::uint64_t runs_key(const std::vector<par::index_run>& runs) {
  std::uint64_t h = 0;
  for (const par::index_run& r : runs)
    h = (h ^ static_cast<std::uint64_t>(r.offset)) * 1099511628211ull ^
        static_cast<std::uint64_t>(r.length);
  return h;
}

// What a rank tells the others of each output for the replica check: a flag (it ran), the block,
// and the hash of its bits.
constexpr std::size_t replica_fields = 5;
void describe_outputs(const par::case_plan& plan, const run_result& got,
                      std::vector<std::uint64_t>& mine) {
  for (std::size_t i = 0; i < plan.outputs.size(); ++i) {
    const block& b = plan[plan.outputs[i]].region;
    const std::uint64_t desc[replica_fields] = {
        1, static_cast<std::uint64_t>(b.row0) ^ runs_key(b.row_runs),
        static_cast<std::uint64_t>(b.rows),
        (static_cast<std::uint64_t>(b.col0) << 32 | static_cast<std::uint64_t>(b.cols)) ^
            runs_key(b.col_runs),
        hash_bits(got.out(plan.outputs[i]))};
    std::copy(desc, desc + replica_fields,
              mine.begin() + static_cast<std::ptrdiff_t>(i * replica_fields));
  }
}

// replicas: ranks holding the same block of an output hold the same bits. Every rank takes part,
// even after a failure. \note collective over case_comm.
void check_replicas(case_run& run, par::comm& case_comm, const std::vector<tensor_slot>& outputs,
                    const std::vector<std::uint64_t>& mine) {
  if (!run.on(property::replicas)) return;
  std::vector<std::uint64_t> all(mine.size() * static_cast<std::size_t>(case_comm.size()));
  par::check_mpi(
      MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_UINT64_T, all.data(),
                    static_cast<int>(mine.size()), MPI_UINT64_T, case_comm.native_handle()),
      "replica exchange");
  for (int q = 0; q < case_comm.size(); ++q) {
    if (q == run.rank) continue;
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      const std::uint64_t* a = mine.data() + i * replica_fields;
      const std::uint64_t* b =
          all.data() + (static_cast<std::size_t>(q) * outputs.size() + i) * replica_fields;
      if (a[0] == 0 || b[0] == 0) continue;  // a rank that failed to run holds nothing
      if (std::equal(a, a + 4, b) && a[4] != b[4])
        return run.fail(property::replicas, par::name_of(outputs[i], run.c) + " rows " +
                                                std::to_string(a[1]) + "+" + std::to_string(a[2]) +
                                                " is replicated on ranks " +
                                                std::to_string(run.rank) + " and " +
                                                std::to_string(q) + " with different bits");
    }
  }
}

}  // namespace

double statistical_events(const par::run_case& c, std::span<const par::chain_lengths> chains,
                          bool forward, bool backward) {
  const auto& p = c.prob;
  const std::vector<std::int64_t> d = p.widths();
  const auto rows = static_cast<double>(p.M);
  const bool stack = d.size() > 2;  // every layer's H_l is bounded, whatever is judged
  double events = 0;
  for (std::size_t l = 1; l < d.size() && l <= chains.size(); ++l) {
    const auto in = static_cast<double>(d[l - 1]), out = static_cast<double>(d[l]);
    const par::chain_lengths& k = chains[l - 1];
    // Per element and computation, one event per term of its dot product (each term's rounding
    // factors are the chain, at most k): the contraction length, or the chain if it is longer.
    const auto terms = [](std::int64_t k_par, std::int64_t n) {
      return static_cast<double>(std::max(k_par, n) + n);
    };
    if (forward || stack) events += rows * out * terms(k.y, d[l - 1]);
    if (backward) {
      events += rows * in * terms(k.dx, d[l]);
      events += out * in * terms(k.dw, p.M);
    }
  }
  return events;
}

std::size_t error_figures::index(dtype t, par::tensor out, value_mode m) {
  const std::size_t ti = out == tensor::y ? 0 : out == tensor::dx ? 1 : 2;
  return (static_cast<std::size_t>(t) * tensors + ti) * modes + static_cast<std::size_t>(m);
}

void error_figures::merge(const error_figures& o) {
  for (std::size_t i = 0; i < size; ++i) {
    cells[i].err_u_mag = std::max(cells[i].err_u_mag, o.cells[i].err_u_mag);
    cells[i].rigorous = std::max(cells[i].rigorous, o.cells[i].rigorous);
    cells[i].statistical = std::max(cells[i].statistical, o.cells[i].statistical);
  }
}

error_cell error_figures::over_modes(dtype t, par::tensor out) const {
  error_cell c;
  for (std::size_t m = 0; m < modes; ++m) {
    const error_cell& x = cells[index(t, out, static_cast<value_mode>(m))];
    c.err_u_mag = std::max(c.err_u_mag, x.err_u_mag);
    c.rigorous = std::max(c.rigorous, x.rigorous);
    c.statistical = std::max(c.statistical, x.statistical);
  }
  return c;
}

double error_figures::worst_u_mag() const {
  double w = 0;
  for (const error_cell& c : cells) w = std::max(w, c.err_u_mag);
  return w;
}

rank_inputs inputs_of(const par::case_plan& plan, const par::run_case& c) {
  rank_inputs in;
  for (const par::tensor_plan& t : plan.tensors) {
    if (!t.is_input()) continue;
    any_matrix m = generate_block(c, t);
    if (t.slot.t == tensor::x)
      in.x = std::move(m);
    else if (t.slot.t == tensor::dy)
      in.dy = std::move(m);
    else
      in.ws.push_back(std::move(m));
  }
  return in;
}

verdict run_on_rank(const subject& s, const par::run_case& c, par::comm& case_comm, unsigned mask) {
  case_run run{s, c, mask, case_comm.rank(), {}};
  const std::vector<tensor_slot> outputs = par::outputs_of(c);
  std::vector<std::uint64_t> mine(outputs.size() * replica_fields, 0);
  try {
    par::mesh grid(case_comm, s.k->mesh_dims(c), par::stack_options{c.backend, s.wrap});
    const par::case_plan plan = par::plan_of(*s.k, c, grid.coords());
    const par::claims cl = s.k->cost(c, plan.coords);
    const rank_inputs in = inputs_of(plan, c);
    const run_result first = run_once(*s.k, c, grid, in, cl);
    check_outputs(run, plan, cl, first);
    check_ledger(run, cl, first);
    check_memory(run, grid, plan, cl, first);
    check_determinism(run, grid, plan, in, cl, first);
    describe_outputs(plan, first, mine);
  } catch (const std::exception& e) {
    run.fail(property::runs, e.what());
  }
  check_replicas(run, case_comm, outputs, mine);
  return run.v;
}

std::vector<par::ledger_entry> recorded_ledger(const subject& s, const par::run_case& c,
                                               par::comm& case_comm) {
  par::mesh grid(case_comm, s.k->mesh_dims(c), par::stack_options{c.backend, s.wrap});
  const par::case_plan plan = par::plan_of(*s.k, c, grid.coords());
  const par::claims cl = s.k->cost(c, plan.coords);
  return run_once(*s.k, c, grid, inputs_of(plan, c), cl).log;
}

}  // namespace shardcheck::prop
