#include "shardcheck/properties/harness.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <type_traits>
#include <variant>

#include "shardcheck/parallel/flight.hpp"
#include "shardcheck/parallel/memory.hpp"
#include "shardcheck/parallel/pmpi.hpp"

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
    case property::invariance: return "invariance";
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
                            "replicas, invariance)");
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

// "Y rows 0-2047 × columns 0-4095 on rank 1, row i=17 at local 17": a block and one of its rows.
std::string block_where(const std::string& t, const block& b, int rank,
                        const std::vector<int>& coords, std::int64_t li) {
  std::ostringstream os;
  const auto span = [&os](const std::vector<par::index_run>& runs) {
    const char* sep = "";
    for (const par::index_run& r : runs) {
      os << sep << r.offset << '-' << r.offset + r.length - 1;
      sep = ",";
    }
  };
  os << t << " rows ";
  span(par::runs_of_rows(b));
  os << " × columns ";
  span(par::runs_of_cols(b));
  os << " on rank " << rank;
  if (coords.size() > 1) {
    os << " (coords";
    for (int v : coords) os << ' ' << v;
    os << ')';
  }
  os << ", row i=" << par::global_index(par::runs_of_rows(b), li) << " at local " << li;
  return os.str();
}

// The chains of case c's layers, or zeros when the kernel claims none (then only exact mode, which
// is bitwise and needs no chain, is judged).
std::vector<par::chain_lengths> chains_or_zero(const par::claims& cl, const par::run_case& c) {
  if (cl.chains) return *cl.chains;
  return std::vector<par::chain_lengths>(c.prob.layers());
}

// "Y on rank 1 is 3×4, its placement says 3×5", or empty where the block has its shape.
std::string shape_mismatch(const par::tensor_plan& t, std::size_t rows, std::size_t cols,
                           int rank) {
  const block& b = t.region;
  if (static_cast<std::int64_t>(rows) == b.rows && static_cast<std::int64_t>(cols) == b.cols)
    return {};
  std::ostringstream os;
  os << t.name << " on rank " << rank << " is " << rows << "×" << cols << ", its placement says "
     << b.rows << "×" << b.cols;
  return os.str();
}

// What a rank tells the others of each output it judged, for the failure's text: it failed (1),
// the shape of its error (verdict.hpp diagnose), whose block it holds, the multiple, the part,
// and for a kernel with micro-batches the one its first out-of-bound row of Y or dX is in and
// their count (−1, 0 otherwise).
constexpr std::size_t shape_fields = 8;
using shape_record = std::array<int, shape_fields>;

// Judges output t on this rank against `reference()` (called only for a block of this shape with
// elements); returns an empty string when it passes. Updates the error figures (and worst_error,
// their largest err/u·mag). On a failure, the block is diagnosed (`context()` gives what the
// diagnosis compares with) into `rec` and the message.
template <class Reference, class Context>
std::string judge(const par::kernel& k, const par::run_case& c, const par::tensor_plan& t,
                  const any_matrix& got, const tolerance& tol, int rank,
                  const std::vector<int>& coords, verdict& v, const Reference& reference,
                  const Context& context, shape_record& rec) {
  const block& b = t.region;
  if (std::string bad = shape_mismatch(t, par::rows_of(got), par::cols_of(got), rank); !bad.empty())
    return bad;
  if (b.rows == 0 || b.cols == 0) return {};  // nothing here (e.g. another stage's tensor)
  const block_reference& want = reference();
  const judgement j = judge_block(tol, got, want);
  error_cell& cell = v.errors.at(c.prob.type, t.slot.t, c.mode);
  cell.err_u_mag = std::max(cell.err_u_mag, j.worst.err_u_mag);
  cell.rigorous = std::max(cell.rigorous, j.worst.rigorous);
  cell.statistical = std::max(cell.statistical, j.worst.statistical);
  v.worst_error = std::max(v.worst_error, cell.err_u_mag);
  if (!j.first) return {};
  std::string msg = describe(j, tol, where(t.name, b, rank, coords, j.first->row, j.first->col));
  std::pair<int, int> batch{-1, 0};
  if (t.slot.t == tensor::y || t.slot.t == tensor::dx)
    batch = k.micro_batch_of(
        c, par::global_index(par::runs_of_rows(b), static_cast<std::int64_t>(j.first->row)));
  rec = {1, static_cast<int>(error_shape::other), -1, 0, -1, 0, batch.first, batch.second};
  try {  // the diagnosis only adds to the message: a failure to make it leaves the shape "other"
    const diagnosis d = diagnose(tol, j, got, want, context());
    rec = {1, static_cast<int>(d.shape), d.rank, d.k, d.part, d.parts, batch.first, batch.second};
    msg += "; " + describe(d, b);
  } catch (const std::exception& x) {
    msg += "; shape: other (no diagnosis: " + std::string(x.what()) + ")";
  }
  return msg;
}

// The ranks whose block of an output failed, each with its shape: "out of bound on ranks 1
// (zero), 3 (zero) of 4"; every failing rank holding its neighbour's block (r + 1 or r − 1, the
// same for all) is a shift by one shard.
std::string ranks_text(const std::vector<shape_record>& all, int p, bool& shifted) {
  std::string out;
  int failing = 0, on = 0, back = 0;
  for (int q = 0; q < p; ++q) {
    const shape_record& r = all[static_cast<std::size_t>(q)];
    if (r[0] == 0) continue;
    ++failing;
    const auto shape = static_cast<error_shape>(r[1]);
    if (shape == error_shape::permuted && r[2] >= 0) {
      on += r[2] == (q + 1) % p ? 1 : 0;
      back += r[2] == (q + p - 1) % p ? 1 : 0;
    }
    out += (out.empty() ? "" : ", ") + std::to_string(q) + " (" + std::string(to_string(shape));
    if (shape == error_shape::permuted && r[2] >= 0) out += ": rank " + std::to_string(r[2]) + "'s";
    if (shape == error_shape::multiple)
      out += r[3] > 0 ? " ×" + std::to_string(r[3]) : " ÷" + std::to_string(-r[3]);
    if (r[4] >= 0 && r[2] >= 0) out += ": rank " + std::to_string(r[2]) + "'s";
    if (r[4] >= 0 && r[2] < 0)
      out += ": part " + std::to_string(r[4]) + " of " + std::to_string(r[5]);
    out += ")";
  }
  shifted = failing > 0 && (on == failing || back == failing);
  return "out of bound on rank" + std::string(failing > 1 ? "s " : " ") + out + " of " +
         std::to_string(p);
}

// Where a stack or a pipeline first goes wrong, from every rank's records of every output: in
// backward order, the first layer whose dW is out of bound while every layer after it (whose
// backward runs first) is within; the first micro-batch whose rows of Y or dX are out of bound.
// "" when neither applies: "; first diverging: dW of layer 2 of 3 (layer 3's within bound),
// micro-batch 1 of 4".
std::string first_diverging(const par::run_case& c, const std::vector<tensor_slot>& outputs,
                            const std::vector<shape_record>& all, int p) {
  const std::size_t n = outputs.size();
  const auto failed = [&](std::size_t i) {
    for (int q = 0; q < p; ++q)
      if (all[static_cast<std::size_t>(q) * n + i][0] == 1) return true;
    return false;
  };
  const auto layers = static_cast<int>(c.prob.layers());
  int layer = -1, batch = -1, batches = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (outputs[i].t == tensor::dw && layers > 1 && failed(i))
      layer = std::max(layer, static_cast<int>(outputs[i].layer));
    if (outputs[i].t != tensor::y && outputs[i].t != tensor::dx) continue;
    for (int q = 0; q < p; ++q) {
      const shape_record& r = all[static_cast<std::size_t>(q) * n + i];
      if (r[0] != 1 || r[6] < 0) continue;
      batches = r[7];
      batch = batch < 0 ? r[6] : std::min(batch, r[6]);
    }
  }
  std::string out;
  if (layer >= 0) {
    out = "dW of layer " + std::to_string(layer + 1) + " of " + std::to_string(layers);
    if (layer + 1 < layers)
      out += " (" + std::string(layer + 2 < layers ? "layers " : "layer ") +
             std::to_string(layer + 2) + (layer + 2 < layers ? "–" + std::to_string(layers) : "") +
             " within bound)";
  }
  if (batch >= 0)
    out += (out.empty() ? "" : ", ") + std::string("micro-batch ") + std::to_string(batch) +
           " of " + std::to_string(batches);
  return out.empty() ? out : "; first diverging: " + out;
}

struct run_result {
  any_matrix y, dx;
  std::vector<any_matrix> dws;  // dW_1 … dW_L
  std::vector<par::ledger_entry> log;
  std::int64_t peak_forward = 0, peak_backward = 0;
  std::int64_t mpi_peak = 0;  // MPI's own heap inside the kernel's calls, either phase (apart)
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
                    const rank_inputs& in, const par::claims& cl,
                    par::pmpi::interceptor* hook = nullptr, par::pmpi::perturbation stir = {}) {
  run_result r;
  r.dws.resize(in.ws.size());
  par::ledger log;
  if (cl.collectives) log.reserve(cl.collectives->forward.size() + cl.collectives->backward.size());
  grid.attach(&log, true);
  const par::pmpi::recording raw(log, true, raw_comms(grid), hook, stir);
  par::context ctx{grid};
  log.set_phase(par::phase::forward);
  par::flight::phase("forward");
  {
    mem::peak_scope scope;
    k.forward(ctx, c, par::forward_io{in.x, in.ws, r.y});
    r.peak_forward = static_cast<std::int64_t>(scope.peak());
    r.mpi_peak = static_cast<std::int64_t>(scope.mpi_peak());
  }
  log.set_phase(par::phase::backward);
  par::flight::phase("backward");
  {
    mem::peak_scope scope;
    k.backward(ctx, c, par::backward_io{in.x, in.ws, in.dy, r.dx, r.dws});
    r.peak_backward = static_cast<std::int64_t>(scope.peak());
    r.mpi_peak = std::max(r.mpi_peak, static_cast<std::int64_t>(scope.mpi_peak()));
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

// splitmix64's finalizer: a bijection of 64 bits, each output bit depending on every input bit.
constexpr std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The replica check's hash of a block's bits, every NaN taken as one canonical NaN: IEEE 754 does
// not say which operand's payload (or sign) a NaN result carries, and an MPI library reduces in an
// operand order of its own on each rank (MPICH's MPI_SUM adds a + b on one rank, b + a on the
// other), so NaN payloads may differ between correct replicas; a NaN against a number still does.
// Element by element, each folded into one of four chains (i mod 4) by mix64, so that the chains
// run side by side; a single element's change changes its chain's value (a bijection at every
// step) and so the hash, as the byte-wise FNV-1a this replaced did, at a tenth of its cost.
std::uint64_t hash_bits(const any_matrix& m) {
  return std::visit(
      [](const auto& v) {
        using T = typename std::decay_t<decltype(v.data)>::value_type;
        static_assert(sizeof(T) <= sizeof(std::uint64_t));
        std::uint64_t lane[4] = {0x243f6a8885a308d3ull, 0x13198a2e03707344ull,
                                 0xa4093822299f31d0ull, 0x082efa98ec4e6c89ull};
        const std::size_t n = v.data.size();
        for (std::size_t i = 0; i < n; ++i) {
          const T& x = v.data[i];
          std::uint64_t word = 0;
          if (x != x) {  // NaN (float, double, bfloat16_t, half_t alike)
            word = sizeof(T) == 8 ? ~0ull : (1ull << (8 * sizeof(T))) - 1;
          } else {
            std::memcpy(&word, &x, sizeof(T));
          }
          lane[i & 3] = mix64(lane[i & 3] ^ word);
        }
        std::uint64_t h = mix64(1469598103934665603ull ^ (v.rows * 0x9e3779b97f4a7c15ull) ^ v.cols);
        for (const std::uint64_t l : lane) h = mix64(h ^ l);
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
        if (va.data.empty() ||
            std::memcmp(va.data.data(), vb.data.data(), va.data.size() * sizeof(va.data[0])) == 0)
          return -1;
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
  par::pmpi::interceptor* hook = nullptr;  // a mutant's, on the kernel's raw MPI calls

  [[nodiscard]] bool on(property p) const { return (mask & static_cast<unsigned>(p)) != 0; }
  void fail(property p, const std::string& msg) {
    const auto bit = static_cast<unsigned>(p);
    if ((v.failed & bit) != 0) return;
    v.failed |= bit;
    if (v.message.empty()) v.message = std::string(to_string(p)) + ": " + msg;
  }
  // The ranks out of step (flight.hpp): this message replaces any other, the same on every rank.
  void out_of_step(const par::flight::out_of_step& e) {
    v.failed |= static_cast<unsigned>(property::runs);
    v.message = std::string(to_string(property::runs)) + ": " + e.what();
  }
  void not_claimed(property p) { v.not_claimed |= static_cast<unsigned>(p); }
  void not_measured(property p) { v.not_measured |= static_cast<unsigned>(p); }
};

// A block's description, the same on every rank that holds it (tiled runs folded in).
std::uint64_t runs_key(const std::vector<par::index_run>& runs);
// takes part, the block's description (3), tiled or not, its first row, its column count
constexpr std::size_t share_fields = 7;
void describe_block(const block& b, bool takes_part, std::uint64_t* out) {
  out[0] = takes_part ? 1 : 0;
  out[1] = static_cast<std::uint64_t>(b.row0) ^ runs_key(b.row_runs);
  out[2] = static_cast<std::uint64_t>(b.rows);
  out[3] = (static_cast<std::uint64_t>(b.col0) << 32 | static_cast<std::uint64_t>(b.cols)) ^
           runs_key(b.col_runs);
  out[4] = b.row_runs.empty() && b.col_runs.empty() ? 0 : 1;
  out[5] = static_cast<std::uint64_t>(b.row0);
  out[6] = static_cast<std::uint64_t>(b.cols);
}

// How this rank's block of one output shares its reference with other ranks, from every rank's
// description (the same decision on every rank):
// - replicas: r ranks hold the same block; the q-th computes the products over the q-th r-th of
//   the inner dimension and the parts are summed across them;
// - tiles: g ranks hold blocks of the same columns, each on one rank, whose rows together are
//   one run [lo, lo + rows): the q-th computes the whole run's products over the q-th g-th of
//   the inner dimension, and a reduce-scatter gives each its own rows summed — when that holds
//   less than computing its own block over the whole inner dimension. sharded_weights on p = 4,
//   M = 4·m: dW (N/4 rows × K on each rank, inner M) costs each rank m rows of dY and X instead
//   of M, for N × K of partial sums.
// - alone: the block, whole, on this rank.
struct share {
  bool split = false;  // some group of this output has more than one rank: split case_comm
  int color = MPI_UNDEFINED, key = 0;
  int parts = 1, part = 0;  // the inner dimension in `parts`, this rank's the `part`-th
  bool tiles = false;
  std::int64_t lo = 0, rows = 0;  // tiles: the rows computed together
  std::vector<int> counts;        // tiles: each member's elements, in row order
};
share share_of(const std::vector<std::uint64_t>& all, std::size_t i, std::size_t outputs, int p,
               int me, std::int64_t inner) {
  share s;
  const auto at = [&](int j) {
    return all.data() + (static_cast<std::size_t>(j) * outputs + i) * share_fields;
  };
  const auto same = [&](int j, int k) { return std::equal(at(j) + 1, at(j) + 4, at(k) + 1); };
  std::vector<int> holders(static_cast<std::size_t>(p), 0);
  for (int j = 0; j < p; ++j)
    for (int k = 0; k < p && at(j)[0] == 1; ++k)
      if (at(k)[0] == 1 && same(j, k)) ++holders[static_cast<std::size_t>(j)];
  for (int j = 0; j < p; ++j) {
    if (holders[static_cast<std::size_t>(j)] <= 1) continue;
    s.split = true;
    if (at(me)[0] == 1 && same(j, me)) {
      if (s.color == MPI_UNDEFINED) s.color = j;
      if (j < me) ++s.part;
      s.parts = holders[static_cast<std::size_t>(me)];
    }
  }
  // Tiles: untiled blocks on one rank each, grouped by their columns, in row order.
  const auto tile = [&](int j) {
    return at(j)[0] == 1 && at(j)[4] == 0 && holders[static_cast<std::size_t>(j)] == 1;
  };
  for (int j = 0; j < p; ++j) {
    if (!tile(j)) continue;
    bool first = true;
    for (int k = 0; k < j && first; ++k) first = !(tile(k) && at(k)[3] == at(j)[3]);
    if (!first) continue;
    std::vector<int> members;
    for (int k = j; k < p; ++k)
      if (tile(k) && at(k)[3] == at(j)[3]) members.push_back(k);
    if (members.size() < 2) continue;
    std::sort(members.begin(), members.end(), [&](int a, int b) { return at(a)[5] < at(b)[5]; });
    const auto g = static_cast<std::int64_t>(members.size());
    const auto cols = static_cast<std::int64_t>(at(j)[6]);
    std::int64_t next = static_cast<std::int64_t>(at(members[0])[5]), own_most = 0;
    bool run = true;
    for (int k : members) {
      const auto r0 = static_cast<std::int64_t>(at(k)[5]), rs = static_cast<std::int64_t>(at(k)[2]);
      run = run && r0 == next;
      next = r0 + rs;
      own_most = std::max(own_most, (rs + cols) * inner + 2 * rs * cols);
    }
    const std::int64_t lo = static_cast<std::int64_t>(at(members[0])[5]), rows = next - lo;
    const std::int64_t together = (rows + cols) * ((inner + g - 1) / g) + 2 * rows * cols;
    if (!run || together > own_most || rows > INT_MAX / std::max<std::int64_t>(cols, 1)) continue;
    s.split = true;
    const auto mine = std::find(members.begin(), members.end(), me);
    if (mine == members.end()) continue;
    s.color = p + j;
    s.key = static_cast<int>(mine - members.begin());
    s.parts = static_cast<int>(g);
    s.part = s.key;
    s.tiles = true;
    s.lo = lo;
    s.rows = rows;
    for (int k : members) s.counts.push_back(static_cast<int>(at(k)[2] * cols));
  }
  if (!s.tiles) s.key = me;
  return s;
}

// Each member's rows of `whole` (rows × cols, row-major, members in row order), summed across
// them, into `own`.
template <class V>
void sum_scattered(const V* whole, V* own, const std::vector<int>& counts, MPI_Comm group) {
  const MPI_Datatype type = std::is_same_v<V, float> ? MPI_FLOAT : MPI_DOUBLE;
  par::check_mpi(MPI_Reduce_scatter(whole, own, counts.data(), type, MPI_SUM, group),
                 "reference sum");
}

// Sums n elements across `group`, in pieces that an int counts.
template <class V>
void sum_across(V* data, std::size_t n, MPI_Comm group) {
  const MPI_Datatype type = std::is_same_v<V, float> ? MPI_FLOAT : MPI_DOUBLE;
  for (std::size_t at = 0; at < n; at += std::size_t{1} << 30) {
    const std::size_t piece = std::min(n - at, std::size_t{1} << 30);
    par::check_mpi(
        MPI_Allreduce(MPI_IN_PLACE, data + at, static_cast<int>(piece), type, MPI_SUM, group),
        "reference sum");
  }
}

// The block's rows (rows × cols, row-major), each member's share of them computed (member q's:
// rows·q/r to rows·(q + 1)/r, in group order, at the start of `part`), gathered into `whole`.
template <class V>
void gather_rows(const V* part, V* whole, std::size_t rows, std::size_t cols, MPI_Comm group) {
  const MPI_Datatype type = std::is_same_v<V, float> ? MPI_FLOAT : MPI_DOUBLE;
  int r = 0, q = 0;
  par::check_mpi(MPI_Comm_size(group, &r), "reference rows");
  par::check_mpi(MPI_Comm_rank(group, &q), "reference rows");
  std::vector<int> counts, displs;
  for (int j = 0; j < r; ++j) {
    const std::size_t a = rows * static_cast<std::size_t>(j) / static_cast<std::size_t>(r),
                      b = rows * static_cast<std::size_t>(j + 1) / static_cast<std::size_t>(r);
    counts.push_back(static_cast<int>((b - a) * cols));
    displs.push_back(static_cast<int>(a * cols));
  }
  par::check_mpi(MPI_Allgatherv(part, counts[static_cast<std::size_t>(q)], type, whole,
                                counts.data(), displs.data(), type, group),
                 "reference rows");
}

// Whether every member of a group of replicas of output t (Y or dX: its rows are X's or dY's)
// holds, in its own inputs, the panels of its share of the block's rows (member `part` of
// `parts`: rows·part/parts to rows·(part + 1)/parts) over the whole inner dimension: the rows of
// X (dY) whole, and W for the block's columns whole. Then each computes its rows, as the kernel
// computed them before gathering them (data_parallel's Y): the reference's values match the
// kernel's bit for bit more often, and the block's magnitudes are not needed (staged_reference),
// while the reference holds what the rank's inputs hold. The same answer on every member: a
// minimum over the group (its elements count within an int, as MPI's gather counts them).
bool rows_of_own_inputs(const par::run_case& c, const par::case_plan& plan, tensor t, int part,
                        int parts, MPI_Comm group) {
  int ok = 0;
  const block& out = plan[tensor_slot{t}].region;
  if ((t == tensor::y || t == tensor::dx) && out.row_runs.empty() && out.col_runs.empty() &&
      out.rows * out.cols <= INT_MAX && c.prob.layers() == 1) {
    const bool out_in = c.prob.layout == weight_layout::out_in;
    const std::int64_t inner = inner_of(c.prob, t);
    const block& a = plan[tensor_slot{t == tensor::y ? tensor::x : tensor::dy}].region;
    const block& w = plan[tensor_slot{tensor::w, 0}].region;
    const std::int64_t lo = out.rows * part / parts, hi = out.rows * (part + 1) / parts;
    const auto whole = [](const block& b, bool by_rows, std::int64_t from, std::int64_t n) {
      return by_rows ? b.row0 == from && b.rows == n : b.col0 == from && b.cols == n;
    };
    // W's rows are Y's columns (out_in) for Y and the inner N for dX; in_out the other way.
    const bool w_cols_by_rows = (t == tensor::y) == out_in;
    const bool placed_plainly = [&] {
      for (const tensor_slot s :
           {tensor_slot{t == tensor::y ? tensor::x : tensor::dy}, tensor_slot{tensor::w, 0}})
        for (const par::placement& pl : plan[s].where)
          if (pl.what == par::placement::kind::partial) return false;
      return true;
    }();
    ok = placed_plainly && a.row_runs.empty() && a.col_runs.empty() && w.row_runs.empty() &&
                 w.col_runs.empty() && hi > lo && whole(a, true, out.row0 + lo, hi - lo) &&
                 whole(a, false, 0, inner) && whole(w, w_cols_by_rows, out.col0, out.cols) &&
                 whole(w, !w_cols_by_rows, 0, inner)
             ? 1
             : 0;
  }
  par::check_mpi(MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, group), "reference rows");
  return ok == 1;
}

// forward, backward: every output block of this rank against the reference. A single layer's
// block that other ranks' blocks share a reference with (share_of: its replicas, or the tiles of
// the same columns) is checked against a reference those ranks compute together, each over its
// part of the inner dimension. data_parallel on p = 4, M = 4·m: dW (N × K, on every rank) costs
// each rank the products over m rows of dY and X, not M — the check stays O(own shard) as p
// grows. A block with nothing to share is computed whole, here. `plan`, `cl` and `got` are null
// on a rank whose run failed: it takes part in the collectives and checks nothing.
// \note collective over case_comm.
void check_outputs(case_run& run, par::comm& case_comm, const par::case_plan* plan,
                   const par::claims* cl, const run_result* got) {
  const par::run_case& c = run.c;
  const std::vector<tensor_slot> outputs = par::outputs_of(c);
  const bool stack = c.prob.layers() > 1;
  const bool ran = plan != nullptr;
  const bool judgeable = ran && (cl->chains.has_value() || c.mode == value_mode::exact);
  const auto takes_part = [&](const tensor_slot& t) {
    const property p = t.t == tensor::y ? property::forward : property::backward;
    return judgeable && !stack && !is_storage16(c.prob.type) && run.on(p) &&
           (*plan)[t].region.rows > 0 && (*plan)[t].region.cols > 0;
  };
  std::vector<std::uint64_t> mine(outputs.size() * share_fields, 0), all;
  for (std::size_t i = 0; ran && i < outputs.size(); ++i)
    describe_block((*plan)[outputs[i]].region, takes_part(outputs[i]),
                   mine.data() + i * share_fields);
  const int p = case_comm.size(), me = case_comm.rank();
  // Every rank's shares (a stack's reference is whole on every rank: it uses none). The first
  // exchange after the kernel, and a watched one (flight.hpp): a rank that returned early, or left
  // by an exception, waits here while the others wait in a call it never makes.
  all.resize(mine.size() * static_cast<std::size_t>(p));
  {
    MPI_Request r = MPI_REQUEST_NULL;
    par::check_mpi(
        MPI_Iallgather(mine.data(), static_cast<int>(mine.size()), MPI_UINT64_T, all.data(),
                       static_cast<int>(mine.size()), MPI_UINT64_T, case_comm.native_handle(), &r),
        "reference shares");
    try {
      par::flight::wait_returned(r, case_comm.native_handle(), ran ? "" : run.v.message);
    } catch (const par::flight::out_of_step&) {
      // Abandoned: MPI may still read and write both buffers.
      new std::vector<std::uint64_t>(std::move(mine));  // NOLINT(cppcoreguidelines-owning-memory)
      new std::vector<std::uint64_t>(std::move(all));   // NOLINT(cppcoreguidelines-owning-memory)
      throw;
    }
  }
  const std::vector<par::chain_lengths> chains =
      ran ? chains_or_zero(*cl, c) : std::vector<par::chain_lengths>();
  // The statistical tier: λ from the case's rounding events (verdict.hpp tier_of).
  const statistical_tier tier =
      ran ? tier_of(c, chains, run.on(property::forward), run.on(property::backward),
                    cl->chains.has_value(), plan != nullptr && placed_partial(*plan))
          : statistical_tier{};
  // The projection tier (verdict.hpp): the same answer on every rank, a function of the case.
  const bool projected = judged_by_projection(c);
  const projection_tier ptier =
      ran && projected
          ? projection_tier_of(c, chains, run.on(property::forward), run.on(property::backward),
                               cl->chains.has_value(), placed_partial(*plan))
          : projection_tier{};
  stack_reference whole;
  mem::peak_scope scope;
  const auto start = std::chrono::steady_clock::now();
  // Failures in the order found, each applied after every rank's shapes are known.
  struct pending {
    property prop;
    std::string message;
    std::size_t output;  // outputs.size(): not an output's verdict (the run threw)
  };
  std::vector<pending> fails;
  std::vector<shape_record> shapes(outputs.size(), shape_record{});
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const tensor_slot& t = outputs[i];
    const property prop = t.t == tensor::y ? property::forward : property::backward;
    // 16-bit outputs are judged each against its own widened reference (no group: a group made
    // here would never be freed on that path).
    const share sh = stack || is_storage16(c.prob.type)
                         ? share{}
                         : share_of(all, i, outputs.size(), p, me, inner_of(c.prob, t.t));
    MPI_Comm group = MPI_COMM_NULL;
    if (sh.split)
      par::check_mpi(MPI_Comm_split(case_comm.native_handle(), sh.color, sh.key, &group),
                     "reference group");
    if (ran && run.on(prop) && !judgeable) run.not_claimed(prop);
    if (!ran || !run.on(prop) || !judgeable) continue;
    const par::tensor_plan& tp = (*plan)[t];
    const tolerance tol = tolerance_of(c, chains, t.t, tier);
    const std::int64_t inner = inner_of(c.prob, t.t);
    // What a failing block's diagnosis compares with: the other ranks' blocks of its shape and
    // the partial sums over equal parts of the inner dimension (one per rank or mesh axis).
    const auto context = [&] {
      diagnosis_context ctx;
      ctx.ranks = p;
      const std::vector<int> dims = run.s.k->mesh_dims(c);
      for (int d : dims)
        if (d > 1) ctx.shard_counts.push_back(d);
      ctx.shard_counts.push_back(p);
      std::sort(ctx.shard_counts.begin(), ctx.shard_counts.end());
      ctx.shard_counts.erase(std::unique(ctx.shard_counts.begin(), ctx.shard_counts.end()),
                             ctx.shard_counts.end());
      // The ranks' partition of the block's rows and columns: where any rank's block of any
      // tensor along the same dimension starts or ends (an untiled block's, in its local indices).
      const auto [row_dim, col_dim] = par::dim_names(t, c.prob);
      std::vector<tensor_slot> slots{tensor::x, tensor::dy};
      for (std::size_t l = 0; l < c.prob.layers(); ++l) slots.emplace_back(tensor::w, l);
      const auto cut = [](std::vector<std::size_t>& cuts, std::int64_t at, std::int64_t lo,
                          std::int64_t n) {
        if (at > lo && at < lo + n) cuts.push_back(static_cast<std::size_t>(at - lo));
      };
      const block& own = tp.region;
      for (int q = 0; q < p && own.row_runs.empty() && own.col_runs.empty(); ++q)
        for (const tensor_slot& s : slots) {
          const block bq = par::block_of(*run.s.k, c, s, par::coords_of(q, dims));
          const auto [rn, cn] = par::dim_names(s, c.prob);
          for (const auto& [name, runs] :
               {std::pair{rn, par::runs_of_rows(bq)}, std::pair{cn, par::runs_of_cols(bq)}})
            for (const par::index_run& r : runs)
              for (const std::int64_t at : {r.offset, r.offset + r.length}) {
                if (name == row_dim) cut(ctx.row_cuts, at, own.row0, own.rows);
                if (name == col_dim) cut(ctx.col_cuts, at, own.col0, own.cols);
              }
        }
      for (int q = 0; q < p; ++q) {
        if (q == me) continue;
        const block bq = par::block_of(*run.s.k, c, t, par::coords_of(q, dims));
        if (bq.rows != tp.region.rows || bq.cols != tp.region.cols || bq == tp.region) continue;
        ctx.others.push_back({q,
                              values_of(stack ? whole.block(c, t, bq, chains, tier.lambda).value
                                              : reference_values_of_block(c, t.t, bq, {0, inner})),
                              {}});
      }
      // The block moved to where an even split of its rows (columns) over the ranks, or another
      // rank's block, starts: a misread offset.
      if (own.row_runs.empty() && own.col_runs.empty()) {
        const std::int64_t all_rows = par::dim_length(c.prob, row_dim),
                           all_cols = par::dim_length(c.prob, col_dim);
        std::vector<std::int64_t> row_starts, col_starts;
        for (int q = 0; q < p; ++q) {
          row_starts.push_back(all_rows * q / p);
          col_starts.push_back(all_cols * q / p);
          const block bq = par::block_of(*run.s.k, c, t, par::coords_of(q, dims));
          row_starts.push_back(bq.row0);
          col_starts.push_back(bq.col0);
        }
        for (const bool by_rows : {true, false}) {
          std::vector<std::int64_t>& starts = by_rows ? row_starts : col_starts;
          std::sort(starts.begin(), starts.end());
          starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
          const std::int64_t n = by_rows ? own.rows : own.cols;
          for (const std::int64_t at : starts) {
            if (at == (by_rows ? own.row0 : own.col0) || at + n > (by_rows ? all_rows : all_cols))
              continue;
            block moved = own;
            (by_rows ? moved.row0 : moved.col0) = at;
            ctx.others.push_back(
                {-1,
                 values_of(stack ? whole.block(c, t, moved, chains, tier.lambda).value
                                 : reference_values_of_block(c, t.t, moved, {0, inner})),
                 "the reference's " + std::string(by_rows ? "rows " : "columns ") +
                     std::to_string(at) + "-" + std::to_string(at + n - 1) +
                     " (at a misread offset)"});
          }
        }
      }
      for (const auto& [name, value] : c.params)
        if (value > 1) ctx.shard_sizes.push_back(value);
      // Each rank's partial sum: the reference over the inner indices its input block holds (X's
      // columns for Y, dY's for dX, X's rows for dW), where that is a part of them (f32, f64).
      if (!stack && !is_storage16(c.prob.type)) {
        const tensor_slot in = t.t == tensor::dx ? tensor::dy : tensor::x;
        const bool by_rows = t.t == tensor::dw;
        std::vector<std::vector<par::index_run>> seen;
        for (int q = 0; q < p; ++q) {
          const block bq = par::block_of(*run.s.k, c, in, par::coords_of(q, dims));
          const std::vector<par::index_run> runs =
              by_rows ? par::runs_of_rows(bq) : par::runs_of_cols(bq);
          std::int64_t held = 0;
          for (const par::index_run& r : runs) held += r.length;
          if (held == 0 || held >= inner || std::find(seen.begin(), seen.end(), runs) != seen.end())
            continue;
          seen.push_back(runs);
          std::vector<double> sum;
          for (const par::index_run& r : runs) {
            const std::vector<double> part =
                values_of(reference_values_of_block(c, t.t, tp.region, r));
            if (sum.empty()) sum.assign(part.size(), 0.0);
            for (std::size_t e = 0; e < part.size(); ++e) sum[e] += part[e];
          }
          ctx.partials.push_back({p, q, q, std::move(sum)});
        }
      }
      // Else equal parts, one per rank or mesh axis (a 16-bit reference is over the whole K).
      if (!stack && !is_storage16(c.prob.type) && ctx.partials.empty())
        for (const int n : ctx.shard_counts)
          for (int r = 0; r < n && n > 1; ++r) {
            const par::index_run part{inner * r / n, inner * (r + 1) / n - inner * r / n};
            ctx.partials.push_back(
                {n, r, -1, values_of(reference_values_of_block(c, t.t, tp.region, part))});
          }
      return ctx;
    };
    if (projected) {
      // Replicas of one block (share_of's group) split its inner dimension as for the reference:
      // each computes r, S and X over its part, summed across them (one sum of (m + 2)·rows
      // doubles, m vectors), so that the check's panels stay those of its own share as p grows
      // (data_parallel's dW: M/p rows of dY and X each). A tiled block is projected whole by each
      // of its ranks.
      try {
        const any_matrix& mine_out = got->out(t);
        const bool shared = group != MPI_COMM_NULL && !sh.tiles;
        const int parts = shared ? sh.parts : 1, part = shared ? sh.part : 0;
        const par::index_run piece{inner * part / parts,
                                   inner * (part + 1) / parts - inner * part / parts};
        projection_sums sums;
        std::string error;
        try {
          sums = projection_sums_of(c, t.t, tp.region, piece);
        } catch (const std::exception& x) {
          error = x.what();
        }
        if (shared) {
          // Every member takes part in the sum, whatever happened here: [failed, non-finite,
          // r (m per row), S, X] and Q where the data-aware bound applies (a function of the
          // case: the same on every member).
          const auto rows = static_cast<std::size_t>(tp.region.rows);
          const auto m = static_cast<std::size_t>(projection_vectors);
          const bool aware = data_aware_applies(c, false);
          const std::size_t fields = m + (aware ? 3 : 2);
          std::vector<double> buf(2 + fields * rows, 0.0);
          buf[0] = error.empty() ? 0 : 1;
          buf[1] = sums.finite ? 0 : 1;
          double* const r = buf.data() + 2;
          double* const s = r + m * rows;
          double* const x = s + rows;
          double* const q = x + rows;
          if (error.empty() && sums.r.size() == m * rows) {
            std::copy(sums.r.begin(), sums.r.end(), r);
            std::copy(sums.sum.begin(), sums.sum.end(), s);
            std::copy(sums.max.begin(), sums.max.end(), x);
            if (aware && sums.sq.size() == rows) std::copy(sums.sq.begin(), sums.sq.end(), q);
          }
          sum_across(buf.data(), buf.size(), group);
          if (buf[0] > 0 && error.empty()) error = "a replica's share of the projection failed";
          sums.finite = buf[1] == 0;
          sums.r.assign(r, r + m * rows);
          sums.sum.assign(s, s + rows);
          sums.max.assign(x, x + rows);
          if (aware) sums.sq.assign(q, q + rows);
        }
        if (group != MPI_COMM_NULL) MPI_Comm_free(&group);
        if (!error.empty()) throw std::runtime_error(error);
        if (std::string bad =
                shape_mismatch(tp, par::rows_of(mine_out), par::cols_of(mine_out), run.rank);
            !bad.empty()) {
          fails.push_back({prop, bad, i});
          continue;
        }
        const projection_judgement pj =
            judge_projection(c, t.t, tp.region, mine_out, sums, parts, tol, ptier);
        run.v.check_flops += pj.flops;
        run.v.check_panel_bytes += pj.panel_bytes;
        std::string bad;
        if (pj.declined) {
          // A NaN or Inf in the block or its panels: the element tier judges this block (its
          // non-finite rule), against its reference computed here whole.
          bad = judge(
              *run.s.k, c, tp, mine_out, tol, run.rank, plan->coords, run.v,
              [&] {
                return reference_of_block(c, t.t, tp.region, {0, inner});
              },
              context, shapes[i]);
        } else {
          // Shares of the projection's bounds, apart from the element tier's figures (no
          // err/u·mag: a projection has no per-element magnitude).
          run.v.projected[0] = std::max(run.v.projected[0], pj.worst.rigorous);
          run.v.projected[1] = std::max(run.v.projected[1], pj.worst.statistical);
          if (pj.failed) {
            const block& b = tp.region;
            std::pair<int, int> batch{-1, 0};
            if (t.t == tensor::y || t.t == tensor::dx)
              batch = run.s.k->micro_batch_of(c, par::global_index(par::runs_of_rows(b), pj.row));
            shapes[i] = {
                1, static_cast<int>(error_shape::other), -1, 0, -1, 0, batch.first, batch.second};
            bad =
                describe(pj, tol, ptier, block_where(tp.name, b, run.rank, plan->coords, pj.row)) +
                "; shape: other (not diagnosed by projection: replay with check=reference for "
                "the elements)";
          }
        }
        if (!bad.empty()) fails.push_back({prop, bad, i});
      } catch (const std::exception& x) {
        if (group != MPI_COMM_NULL) MPI_Comm_free(&group);
        fails.push_back({property::runs, x.what(), outputs.size()});
      }
      continue;
    }
    if (stack || is_storage16(c.prob.type)) {  // the whole stack's, or its own widened reference
      try {
        const std::string bad = judge(
            *run.s.k, c, tp, got->out(t), tol, run.rank, plan->coords, run.v,
            [&] {
              return stack ? whole.block(c, t, tp.region, chains, tier.lambda)
                           : reference_of_block(c, t.t, tp.region, {0, inner});
            },
            context, shapes[i]);
        if (!bad.empty()) fails.push_back({prop, bad, i});
      } catch (const std::exception& x) {
        fails.push_back({property::runs, x.what(), outputs.size()});
      }
      continue;
    }
    try {
      block_reference e;
      std::string error;
      if (tp.region.rows > 0 && tp.region.cols > 0) {
        const std::int64_t d = inner_of(c.prob, t.t);
        // Replicas whose own inputs hold their share of the block's rows over the whole inner
        // dimension (rows_of_own_inputs) split it by rows, each computing what it holds the
        // inputs of, as the kernel did before gathering it; others by the inner dimension.
        const bool by_rows = group != MPI_COMM_NULL && !sh.tiles &&
                             rows_of_own_inputs(c, *plan, t.t, sh.part, sh.parts, group);
        const std::int64_t lo = tp.region.rows * sh.part / sh.parts,
                           hi = tp.region.rows * (sh.part + 1) / sh.parts;
        const par::index_run part =
            by_rows ? par::index_run{0, d}
                    : par::index_run{d * sh.part / sh.parts,
                                     d * (sh.part + 1) / sh.parts - d * sh.part / sh.parts};
        block region = tp.region;
        if (sh.tiles) {
          region.row0 = sh.lo;
          region.rows = sh.rows;
        } else if (by_rows) {
          region.row0 += lo;
          region.rows = hi - lo;
        }
        // Every rank of the group takes the same step, or none: a share that failed on one rank
        // leaves the others out of the group's sums.
        const auto all_ok = [&](const std::string& why) {
          int ok = error.empty() ? 1 : 0;
          if (group != MPI_COMM_NULL)
            par::check_mpi(MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, group),
                           "reference group");
          if (ok == 0 && error.empty()) error = why;
          return ok == 1;
        };
        // The values first (staged_reference): the magnitudes only where a rank's block differs
        // from them, for which the group computes and sums them as it did the values.
        std::optional<staged_reference> st;
        try {
          st.emplace(c, t.t, region, part);
        } catch (const std::exception& x) {
          error = x.what();
        }
        block_reference own;  // tiles: this rank's rows of the run, summed
        const auto rows = static_cast<std::size_t>(tp.region.rows);
        const auto cols = static_cast<std::size_t>(tp.region.cols);
        if (all_ok("a replica's share of the reference failed")) {
          block_reference& mine_ref = st->reference();
          if (by_rows) {
            st->drop_panels();  // as for tiles, below
            own.k_ref = mine_ref.k_ref;
            std::visit(
                [&](auto& m) {
                  using V = typename std::decay_t<decltype(m.data)>::value_type;
                  own.value = par::make_matrix<V>(rows, cols);
                  gather_rows(m.data.data(), std::get<matrix<V>>(own.value).data.data(), rows, cols,
                              group);
                },
                mine_ref.value);
          } else if (group != MPI_COMM_NULL && !sh.tiles) {
            std::visit([&](auto& m) { sum_across(m.data.data(), m.data.size(), group); },
                       mine_ref.value);
          } else if (group != MPI_COMM_NULL) {
            // The run's panels are let go before this rank's rows are summed into a block of
            // their own, so that the check's peak stays that of the panels and the run's values
            // (made again should the magnitudes be needed).
            st->drop_panels();
            own.k_ref = mine_ref.k_ref;
            std::visit(
                [&](auto& m) {
                  using V = typename std::decay_t<decltype(m.data)>::value_type;
                  own.value = par::make_matrix<V>(rows, cols);
                  sum_scattered(m.data.data(), std::get<matrix<V>>(own.value).data.data(),
                                sh.counts, group);
                },
                mine_ref.value);
          }
          int need = settled(got->out(t), (sh.tiles || by_rows ? own : mine_ref).value) ? 0 : 1;
          if (group != MPI_COMM_NULL)
            par::check_mpi(MPI_Allreduce(MPI_IN_PLACE, &need, 1, MPI_INT, MPI_MAX, group),
                           "reference group");
          if (need == 1) {
            try {
              st->add_magnitudes();
            } catch (const std::exception& x) {
              error = x.what();
            }
            st->drop_panels();
            if (all_ok("a replica's share of the magnitudes failed")) {
              // The magnitudes, and the squares beside them where the data-aware bound applies
              // (the same on every rank of the group: a function of the case).
              const auto combine = [&](std::vector<double>& mine_v, std::vector<double>& own_v) {
                if (mine_v.empty()) return;
                if (by_rows) {
                  own_v.assign(rows * cols, 0.0);
                  gather_rows(mine_v.data(), own_v.data(), rows, cols, group);
                } else if (group != MPI_COMM_NULL && !sh.tiles) {
                  sum_across(mine_v.data(), mine_v.size(), group);
                } else if (group != MPI_COMM_NULL) {
                  own_v.assign(rows * cols, 0.0);
                  sum_scattered(mine_v.data(), own_v.data(), sh.counts, group);
                }
              };
              combine(mine_ref.mag, own.mag);
              combine(mine_ref.sq, own.sq);
            }
          }
          st->drop_panels();
          if (sh.tiles || by_rows) {
            own.flops = mine_ref.flops;
            own.panel_bytes = mine_ref.panel_bytes;
            e = std::move(own);
          } else {
            e = std::move(mine_ref);
          }
        }
        if (group != MPI_COMM_NULL) MPI_Comm_free(&group);
        run.v.check_flops += e.flops;
        run.v.check_panel_bytes += e.panel_bytes;
        if (!error.empty()) throw std::runtime_error(error);
      }
      const std::string bad = judge(
          *run.s.k, c, tp, got->out(t), tol, run.rank, plan->coords, run.v,
          [&]() -> const block_reference& { return e; }, context, shapes[i]);
      if (!bad.empty()) fails.push_back({prop, bad, i});
    } catch (const std::exception& x) {
      if (group != MPI_COMM_NULL) MPI_Comm_free(&group);
      fails.push_back({property::runs, x.what(), outputs.size()});
    }
  }
  // Every rank's shapes, for the failure's text: which ranks' blocks failed, and how.
  std::vector<shape_record> all_shapes(outputs.size() * static_cast<std::size_t>(p));
  if (!outputs.empty())
    par::check_mpi(
        MPI_Allgather(shapes.data(), static_cast<int>(outputs.size() * shape_fields), MPI_INT,
                      all_shapes.data(), static_cast<int>(outputs.size() * shape_fields), MPI_INT,
                      case_comm.native_handle()),
        "shape exchange");
  const std::string diverging = first_diverging(c, outputs, all_shapes, p);
  for (pending& f : fails) {
    if (f.output < outputs.size() && shapes[f.output][0] == 1) {
      std::vector<shape_record> of(static_cast<std::size_t>(p));
      for (int q = 0; q < p; ++q)
        of[static_cast<std::size_t>(q)] =
            all_shapes[static_cast<std::size_t>(q) * outputs.size() + f.output];
      bool shifted = false;
      const std::string ranks = ranks_text(of, p, shifted);
      const std::string permuted = "shape: permuted, holds rank";
      if (const std::size_t at = f.message.find(permuted); shifted && at != std::string::npos)
        f.message.replace(at, permuted.size(),
                          "shape: shifted (every failing rank holds its neighbour's block), "
                          "holds rank");
      f.message += "; " + ranks + diverging;
    }
    run.fail(f.prop, f.message);
  }
  run.v.check_flops += whole.flops;
  run.v.check_panel_bytes += whole.panel_bytes;
  run.v.check_peak_bytes = static_cast<std::int64_t>(scope.peak());
  run.v.check_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
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
  run.v.mpi_peak_bytes = first.mpi_peak;
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
    try {
      par::complete_and_validate(k, smaller);
    } catch (const par::case_declined&) {
      continue;  // no smaller case the kernel takes to compare with
    }
    const par::case_plan small_plan = par::plan_of(k, smaller, plan.coords);
    const run_result other = run_once(k, smaller, grid, inputs_of(small_plan, smaller),
                                      k.cost(smaller, plan.coords), run.hook);
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

// The longest delay of the determinism check's stir: longer than the skew between ranks of an
// idle machine (a message, a small block's product) takes, short enough to keep the second run's
// cost within its first's (the stir pauses on average at most a third of the time, pmpi.hpp).
constexpr std::chrono::microseconds stir_delay{1000};

// determinism: a second run of the same case gives the same bits. The second run stirs the
// schedule of the kernel's raw MPI calls (pmpi.hpp's perturbation: each rank sleeps up to
// stir_delay, its own delays, before each order-sensitive call), so that a result that depends on
// the order in which ranks' calls arrive shows it in most runs, not only when the timing happens
// to change. The stream of delays follows from the case's seed and the rank (which calls meet
// them follows the clock: a kernel that sends once a run is stirred alike in every replay).
void check_determinism(case_run& run, par::mesh& grid, const par::case_plan& plan,
                       const rank_inputs& in, const par::claims& cl, const run_result& first) {
  if (!run.on(property::determinism)) return;
  const par::pmpi::perturbation stir{
      run.c.seed * 0x9e3779b97f4a7c15ull + static_cast<std::uint64_t>(run.rank), stir_delay};
  const run_result second = run_once(*run.s.k, run.c, grid, in, cl, run.hook, stir);
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
// even after a failure, and the exchange is made whether replicas is checked or not: it is the
// watched exchange after the kernel's re-runs (determinism, memory), where a rank that returned
// early from one waits (flight.hpp). \note collective over case_comm.
// `counted` (one flag per output) says whether this rank is the lowest holding its block.
void check_replicas(case_run& run, par::comm& case_comm, const std::vector<tensor_slot>& outputs,
                    std::vector<std::uint64_t>& mine, std::vector<bool>& counted) {
  std::vector<std::uint64_t> all(mine.size() * static_cast<std::size_t>(case_comm.size()));
  MPI_Request r = MPI_REQUEST_NULL;
  par::check_mpi(
      MPI_Iallgather(mine.data(), static_cast<int>(mine.size()), MPI_UINT64_T, all.data(),
                     static_cast<int>(mine.size()), MPI_UINT64_T, case_comm.native_handle(), &r),
      "replica exchange");
  try {
    par::flight::wait_returned(
        r, case_comm.native_handle(),
        (run.v.failed & static_cast<unsigned>(property::runs)) != 0 ? run.v.message : "");
  } catch (const par::flight::out_of_step&) {
    // Abandoned: MPI may still read and write both buffers.
    new std::vector<std::uint64_t>(std::move(mine));  // NOLINT(cppcoreguidelines-owning-memory)
    new std::vector<std::uint64_t>(std::move(all));   // NOLINT(cppcoreguidelines-owning-memory)
    throw;
  }
  counted.assign(outputs.size(), true);
  for (int q = 0; q < run.rank; ++q)
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      const std::uint64_t* a = mine.data() + i * replica_fields;
      const std::uint64_t* b =
          all.data() + (static_cast<std::size_t>(q) * outputs.size() + i) * replica_fields;
      if (b[0] != 0 && std::equal(a + 1, a + 4, b + 1)) counted[i] = false;
    }
  if (!run.on(property::replicas)) return;
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
    any_matrix m = case_block(c, plan, t);
    if (t.slot.t == tensor::x)
      in.x = std::move(m);
    else if (t.slot.t == tensor::dy)
      in.dy = std::move(m);
    else
      in.ws.push_back(std::move(m));
  }
  return in;
}

verdict run_on_rank(const subject& s, const par::run_case& c, par::comm& case_comm, unsigned mask,
                    kept_outputs* keep) {
  case_run run{s, c, mask, case_comm.rank(), {}};
  const std::vector<tensor_slot> outputs = par::outputs_of(c);
  std::vector<std::uint64_t> mine(outputs.size() * replica_fields, 0);
  // The run, then the outputs' check (collective: replicas share references), then the rest.
  std::optional<par::mesh> grid;
  std::optional<par::case_plan> plan;
  std::optional<par::claims> cl;
  std::optional<rank_inputs> in;
  std::optional<run_result> first;
  std::unique_ptr<par::pmpi::interceptor> hook;
  try {
    grid.emplace(case_comm, s.k->mesh_dims(c), par::stack_options{c.backend, s.wrap});
    for (int a = 0; a < static_cast<int>(grid->dims().size()); ++a)
      par::flight::name(grid->axis(a).native_handle(), "axis " + std::to_string(a));
    par::flight::name(grid->all().native_handle(), "the mesh");
    if (s.raw) {
      std::vector<MPI_Comm> comms;
      for (const par::pmpi::tracked_comm& t : raw_comms(*grid)) comms.push_back(t.comm);
      hook = s.raw(comms);
      run.hook = hook.get();
    }
    plan.emplace(par::plan_of(*s.k, c, grid->coords()));
    cl.emplace(s.k->cost(c, plan->coords));
    if (cl->chains && cl->chains->size() != c.prob.layers())
      throw error("cost() claims " + std::to_string(cl->chains->size()) +
                  " chain_lengths for a case of L = " + std::to_string(c.prob.layers()) +
                  " layers: one per layer");
    in.emplace(inputs_of(*plan, c));
    first.emplace(run_once(*s.k, c, *grid, *in, *cl, run.hook));
  } catch (const par::flight::out_of_step& e) {
    run.out_of_step(e);
    return run.v;  // no further collective: the case's communicators hold abandoned calls
  } catch (const std::exception& e) {
    run.fail(property::runs, e.what());
  }
  const bool ran = first.has_value();
  try {
    check_outputs(run, case_comm, ran ? &*plan : nullptr, ran ? &*cl : nullptr,
                  ran ? &*first : nullptr);
  } catch (const par::flight::out_of_step& e) {
    run.out_of_step(e);
    return run.v;
  }
  if (ran) try {
      check_ledger(run, *cl, *first);
      check_memory(run, *grid, *plan, *cl, *first);
      // A kernel not deterministic by design claims nothing to judge: never run, never a pass.
      if (s.k->info().deterministic)
        check_determinism(run, *grid, *plan, *in, *cl, *first);
      else if (run.on(property::determinism))
        run.not_claimed(property::determinism);
      describe_outputs(*plan, *first, mine);
    } catch (const par::flight::out_of_step& e) {
      run.out_of_step(e);
      return run.v;
    } catch (const std::exception& e) {
      run.fail(property::runs, e.what());
    }
  std::vector<bool> counted;
  try {
    check_replicas(run, case_comm, outputs, mine, counted);
  } catch (const par::flight::out_of_step& e) {
    run.out_of_step(e);
    return run.v;
  }
  if (keep != nullptr && ran && (run.v.failed & static_cast<unsigned>(property::runs)) == 0) {
    *keep = {};
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      keep->slots.push_back(outputs[i]);
      keep->blocks.push_back((*plan)[outputs[i]].region);
      keep->values.push_back(std::move(outputs[i].t == tensor::y ? first->y
                                       : outputs[i].t == tensor::dx
                                           ? first->dx
                                           : first->dws.at(outputs[i].layer)));
      keep->counted.push_back(counted.at(i));
    }
  }
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
