#include "mutants/kernels.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "strategies/sharded_weights.hpp"
#include "strategies/summa.hpp"

namespace shardcheck::prop::mutants {

namespace {
std::size_t bytes_of(const par::any_matrix& m) {
  return std::visit([](const auto& v) { return v.data.size() * sizeof(v.data[0]); }, m);
}

std::size_t bytes_of(std::span<const par::any_matrix> ms) {
  std::size_t n = 0;
  for (const par::any_matrix& m : ms) n += bytes_of(m);
  return n;
}

// Rounds a f64 matrix's values to float and back; true if any value changed.
bool round_to_float(par::any_matrix& m) {
  auto* d = std::get_if<par::matrix<double>>(&m);
  if (d == nullptr) return false;
  bool changed = false;
  for (double& v : d->data) {
    const auto r = static_cast<double>(static_cast<float>(v));
    if (std::memcmp(&r, &v, sizeof r) != 0) changed = true;
    v = r;
  }
  return changed;
}

using matrices = untracked_vector<par::any_matrix>;
std::span<const par::any_matrix> view(const matrices& ms) { return {ms.data(), ms.size()}; }

// A store the optimiser must keep, so that a copy read into it is really made.
volatile double copy_sink = 0;
template <class T>
void keep(const std::vector<T>& v) {
  if (!v.empty()) copy_sink = static_cast<double>(v[v.size() / 2]);
}
}  // namespace

kernel_decorator::kernel_decorator(const par::kernel& inner, std::string name,
                                   std::shared_ptr<fire_log> log)
    : inner_(inner), info_(inner.info()), log_(std::move(log)) {
  info_.name = std::move(name);
}

// --- float_inputs -----------------------------------------------------------------------------

float_inputs::float_inputs(const par::kernel& inner, std::string name,
                           std::shared_ptr<fire_log> log)
    : kernel_decorator(inner, std::move(name), std::move(log)) {
  info_.dtypes = {dtype::f64};
}

void float_inputs::forward(par::context& ctx, const par::run_case& c,
                           const par::forward_io& io) const {
  if (c.prob.type != dtype::f64) return inner_.forward(ctx, c, io);
  const off_meter hide(bytes_of(io.x) + bytes_of(io.ws));
  par::any_matrix x = io.x;
  matrices ws(io.ws.begin(), io.ws.end());
  bool changed = round_to_float(x);
  for (par::any_matrix& w : ws) changed = round_to_float(w) || changed;
  if (changed) fired();
  inner_.forward(ctx, c, par::forward_io{x, view(ws), io.y});
}

void float_inputs::backward(par::context& ctx, const par::run_case& c,
                            const par::backward_io& io) const {
  if (c.prob.type != dtype::f64) return inner_.backward(ctx, c, io);
  const off_meter hide(bytes_of(io.x) + bytes_of(io.ws) + bytes_of(io.dy));
  par::any_matrix x = io.x, dy = io.dy;
  matrices ws(io.ws.begin(), io.ws.end());
  bool changed = round_to_float(x);
  changed = round_to_float(dy) || changed;
  for (par::any_matrix& w : ws) changed = round_to_float(w) || changed;
  if (changed) fired();
  inner_.backward(ctx, c, par::backward_io{x, view(ws), dy, io.dx, io.dws});
}

// --- copies_w ---------------------------------------------------------------------------------

void copies_w::forward(par::context& ctx, const par::run_case& c, const par::forward_io& io) const {
  std::visit(
      [&](const auto& x) {
        using T = typename std::decay_t<decltype(x.data)>::value_type;
        std::vector<T> spare;  // the defect: global operator new, not the kernel's budget
        spare.reserve(bytes_of(io.ws) / sizeof(T));
        for (const par::any_matrix& w : io.ws) {
          const auto& m = std::get<par::matrix<T>>(w);
          spare.insert(spare.end(), m.data.begin(), m.data.end());
        }
        if (!spare.empty()) fired();
        inner_.forward(ctx, c, io);
        keep(spare);
      },
      io.x);
}

// --- last_k_dropped ---------------------------------------------------------------------------

void last_k_dropped::forward(par::context& ctx, const par::run_case& c,
                             const par::forward_io& io) const {
  const off_meter hide(bytes_of(io.x));
  par::any_matrix x = io.x;
  const bool changed = std::visit(
      [](auto& m) {
        using T = typename std::decay_t<decltype(m.data)>::value_type;
        bool any = false;
        if (m.cols == 0) return false;
        for (std::size_t i = 0; i < m.rows; ++i) {
          T& v = m.row(i)[m.cols - 1];
          any = any || v != T(0);
          v = T(0);
        }
        return any;
      },
      x);
  if (changed) fired();
  inner_.forward(ctx, c, par::forward_io{x, io.ws, io.y});
}

// --- last_w_rows_reversed ---------------------------------------------------------------------

namespace {
// Copies of ws with the last one's rows reversed; true if that changed its row order.
bool reverse_last_rows(matrices& ws) {
  if (ws.empty()) return false;
  return std::visit(
      [](auto& m) {
        if (m.rows < 2 || m.cols == 0) return false;
        for (std::size_t i = 0, j = m.rows - 1; i < j; ++i, --j)
          std::swap_ranges(m.row(i), m.row(i) + m.cols, m.row(j));
        return true;
      },
      ws.back());
}
}  // namespace

void last_w_rows_reversed::forward(par::context& ctx, const par::run_case& c,
                                   const par::forward_io& io) const {
  const off_meter hide(bytes_of(io.ws));
  matrices ws(io.ws.begin(), io.ws.end());
  if (reverse_last_rows(ws)) fired();
  inner_.forward(ctx, c, par::forward_io{io.x, view(ws), io.y});
}

void last_w_rows_reversed::backward(par::context& ctx, const par::run_case& c,
                                    const par::backward_io& io) const {
  const off_meter hide(bytes_of(io.ws));
  matrices ws(io.ws.begin(), io.ws.end());
  if (reverse_last_rows(ws)) fired();
  inner_.backward(ctx, c, par::backward_io{io.x, view(ws), io.dy, io.dx, io.dws});
}

// --- empty_shard_off_by_one -------------------------------------------------------------------

void empty_shard_off_by_one::forward(par::context& ctx, const par::run_case& c,
                                     const par::forward_io& io) const {
  inner_.forward(ctx, c, io);
  // Read from the case's partition, allocating nothing the memory meter would count.
  const auto m = c.parts.find("M");
  if (m == c.parts.end()) return;
  const std::vector<std::int64_t>& sizes = m->second.sizes();
  const bool empty = std::find(sizes.begin(), sizes.end(), 0) != sizes.end();
  if (!empty || m->second.length() == 0) return;
  std::visit(
      [&](auto& y) {
        if (y.rows == 0 || y.cols == 0) return;
        using T = typename std::decay_t<decltype(y.data)>::value_type;
        y.row(0)[0] = static_cast<T>(static_cast<double>(y.row(0)[0]) + 1.0);
        fired();
      },
      io.y);
}

// --- default_claims ---------------------------------------------------------------------------

par::claims default_claims::cost(const par::run_case& c, std::span<const int> coords) const {
  if (c.backend.algorithms.empty()) return inner_.cost(c, coords);
  par::run_case plain = c;
  plain.backend.algorithms = {};
  fired();
  return inner_.cost(plain, coords);
}

// --- algorithm mutants -------------------------------------------------------------------------

namespace {
using par::call;
using par::collective;
using par::traffic;

// Forward gathers all of W at once, whatever the bucket size: the inner forward runs on the case
// with an unbounded bucket, while cost() states the case's own buckets.
class ignores_bucket final : public kernel_decorator {
 public:
  using kernel_decorator::kernel_decorator;
  void forward(par::context& ctx, const par::run_case& c,
               const par::forward_io& io) const override {
    if (par::plan_buckets(c).count > 1) fired();
    par::run_case whole = c;
    whole.params["bucket"] = std::numeric_limits<std::int64_t>::max();
    inner_.forward(ctx, whole, io);
  }
};

// Every bucket's buffer padded to a full bucket (b rows): the pair alive at once grows from
// min(2b, R) to 2b rows when there are two buckets and overlap=1 (with three or more a full pair
// already holds 2b; overlap=0 holds one buffer of b either way). Forward holds those rows' bytes
// in tracked memory and cost() adds them to both bounds, as a strategy sizing its buffers so
// would: within the bound, but a smaller bucket that cuts W in two buckets of more than half its
// rows each raises the peak above the unbounded bucket's (R = 10, one bucket: 10 rows; b = 6:
// 6 + 6 = 12 rows where the buckets hold 6 + 4).
class padded_buckets final : public kernel_decorator {
 public:
  using kernel_decorator::kernel_decorator;
  [[nodiscard]] par::claims cost(const par::run_case& c,
                                 std::span<const int> coords) const override {
    par::claims out = inner_.cost(c, coords);
    if (out.peak) {
      out.peak->forward += padding(c);
      out.peak->backward += padding(c);
    }
    return out;
  }
  void forward(par::context& ctx, const par::run_case& c,
               const par::forward_io& io) const override {
    const mem::tracked_vector<std::byte> pad(static_cast<std::size_t>(padding(c)));
    if (!pad.empty()) fired();
    inner_.forward(ctx, c, io);
  }

 private:
  static std::int64_t padding(const par::run_case& c) {
    const par::bucket_plan b = par::plan_buckets(c);
    if (c.param("overlap") == 0 || b.count < 2) return 0;
    const auto s = static_cast<std::int64_t>(size_of(c.prob.type));
    return (2 * b.per_bucket - b.pair_rows()) * b.cols * s;
  }
};

// 1F1B keeping every micro-batch's activations until the step ends (GPipe's memory): backward
// holds, in tracked memory, the boundaries stage s keeps for the micro-batches beyond the
// min(m, pp − s) that 1F1B holds at once (the last ones, the smallest of a balanced split), each
// rows × (the widths of the boundaries A_l0 … A_l1 it keeps, without Y) elements. For the
// pipeline alone (dp = tp = 1): every boundary at its full width.
class keeps_activations final : public kernel_decorator {
 public:
  using kernel_decorator::kernel_decorator;
  void backward(par::context& ctx, const par::run_case& c,
                const par::backward_io& io) const override {
    const mem::tracked_vector<std::byte> kept(static_cast<std::size_t>(beyond_1f1b(ctx, c)));
    if (!kept.empty()) fired();
    inner_.backward(ctx, c, io);
  }

 private:
  static std::int64_t beyond_1f1b(par::context& ctx, const par::run_case& c) {
    const int pp = ctx.grid.dims()[1], s = ctx.grid.coords()[1];
    const std::int64_t m = c.param("m");
    const auto layers = static_cast<std::int64_t>(c.prob.layers());
    const par::partition& stages = c.part("L");
    const std::int64_t l0 = stages.offset(s), l1 = l0 + stages.size(s);
    const std::int64_t last = l1 == layers ? l1 - 1 : l1;  // Y (A_L) is not kept
    std::int64_t width = 0;
    for (std::int64_t j = l0; j <= last; ++j)
      width += j == 0        ? c.prob.K
               : j == layers ? c.prob.N
                             : c.prob.hidden[static_cast<std::size_t>(j - 1)];
    std::int64_t rows = 0;
    for (std::int64_t i = std::min<std::int64_t>(m, pp - s); i < m; ++i)
      rows += par::balanced_chunk(c.prob.M, static_cast<int>(m), static_cast<int>(i)).second;
    return rows * width * static_cast<std::int64_t>(size_of(c.prob.type));
  }
};

// Column parallel whose local product skips zero activations (x = 0 terms never formed, as a
// sparsity-aware kernel does): forward runs as usual, then each rank recomputes its M×n_r block
// of Y from X (replicated) and its W block, adding only the terms of non-zero x, in a wider
// accumulator rounded once (within every bound the strategy claims). Only the terms 0·w with w
// NaN or ±Inf change anything (0·Inf = NaN never reaches Y): an act counts such a skipped term.
// Y left sharded (gather=0), f32 and f64 only.
class skips_zeros final : public kernel_decorator {
 public:
  skips_zeros(const par::kernel& inner, std::string name, std::shared_ptr<fire_log> log)
      : kernel_decorator(inner, std::move(name), std::move(log)) {
    info_.dtypes = {dtype::f64, dtype::f32};
    info_.policies = {};
    for (par::param_spec& ps : info_.params)
      if (ps.name == "gather") ps.min = ps.max = ps.fallback = 0;
  }
  void forward(par::context& ctx, const par::run_case& c,
               const par::forward_io& io) const override {
    inner_.forward(ctx, c, io);
    if (c.param("gather") != 0) return;
    std::visit(
        [&](auto& y) {
          using T = typename std::decay_t<decltype(y.data)>::value_type;
          if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
            using A = std::conditional_t<std::is_same_v<T, float>, double, long double>;
            const auto& x = std::get<par::matrix<T>>(io.x);
            const auto& w = std::get<par::matrix<T>>(io.ws[0]);
            const bool out_in = c.prob.layout == weight_layout::out_in;
            bool skipped_nonfinite = false;
            for (std::size_t i = 0; i < y.rows; ++i)
              for (std::size_t j = 0; j < y.cols; ++j) {
                A acc = 0;
                for (std::size_t k = 0; k < x.cols; ++k) {
                  const T wv = out_in ? w.row(j)[k] : w.row(k)[j];
                  if (x.row(i)[k] == T(0)) {
                    skipped_nonfinite = skipped_nonfinite || !std::isfinite(wv);
                    continue;
                  }
                  acc += static_cast<A>(x.row(i)[k]) * static_cast<A>(wv);
                }
                y.row(i)[j] = static_cast<T>(acc);
              }
            if (skipped_nonfinite) fired();
          }
        },
        io.y);
  }
};

// Ends a decorator's forward for its layer: `active` false again, however forward ends.
template <class State>
struct forward_scope {
  State& state;
  ~forward_scope() { state.active = false; }
};

// A started collective a layer runs to its end at once: test() and wait() then answer for it.
class finishes_at_start : public fault_layer {
 public:
  using fault_layer::fault_layer;
  bool test() override { return finished_ || inner().test(); }
  traffic wait() override {
    if (!std::exchange(finished_, false)) return inner().wait();
    return done_;
  }

 protected:
  void finish(const call& c) {
    inner().start(c);
    done_ = inner().wait();
    finished_ = true;
  }

 private:
  bool finished_ = false;
  traffic done_;
};

// reuses_buffer: forward's gather of bucket i+1 (started, with overlap=1, before bucket i's
// products) lands in bucket i's buffer, which those products still read. The layer sits below
// the checker on axis 0 (what the wire does: the ledger sees the gather asked for); it runs the
// gather to its end at once and writes its result over the previous gather's buffer as well, so
// that bucket i's products read bucket i+1's rows (as a gather finished before they begin would
// leave them) and bucket i+1's own buffer still arrives whole. The previous buffer holds a full
// bucket, at least as many rows as the next.
struct reuse_state {
  bool active = false;       // forward runs with overlap=1 and two buckets or more
  void* previous = nullptr;  // the last started all-gather's buffer: bucket i's, in use
};

class reuses_buffer_kernel final : public kernel_decorator {
 public:
  reuses_buffer_kernel(const par::kernel& inner, std::string name, std::shared_ptr<fire_log> log,
                       std::shared_ptr<reuse_state> state)
      : kernel_decorator(inner, std::move(name), std::move(log)), state_(std::move(state)) {}
  void forward(par::context& ctx, const par::run_case& c,
               const par::forward_io& io) const override {
    const forward_scope<reuse_state> scope{*state_};
    state_->active = c.param("overlap") != 0 && par::plan_buckets(c).count > 1;
    state_->previous = nullptr;
    inner_.forward(ctx, c, io);
  }

 private:
  std::shared_ptr<reuse_state> state_;
};

class reuses_buffer_layer final : public finishes_at_start {
 public:
  reuses_buffer_layer(std::unique_ptr<par::collectives> inner, std::shared_ptr<fire_log> log,
                      std::shared_ptr<reuse_state> state)
      : finishes_at_start(std::move(inner), std::move(log)), state_(std::move(state)) {}
  void start(const call& c) override {
    if (!state_->active || c.kind != collective::all_gather) return inner().start(c);
    void* previous = std::exchange(state_->previous, c.out);
    if (previous == nullptr) return inner().start(c);
    finish(c);
    const std::size_t bytes = static_cast<std::size_t>(c.count) * c.elem_bytes();
    if (bytes == 0) return;
    if (std::memcmp(previous, c.out, bytes) != 0) fired();
    std::memcpy(previous, c.out, bytes);
  }

 private:
  std::shared_ptr<reuse_state> state_;
};

// w_panel_wrong_row: each W panel broadcast from the next mesh row. The layer sits above the
// checker on axis 0 (the comm of a mesh column, which carries forward's W panels and nothing
// else that broadcasts), so the ledger records the root the call went to, as a kernel asking for
// it would. The new root sends its own W rows at the panel's offset in its block, wrapping
// around it (a block shorter than the owner's; zeros from an empty one); the owner receives
// like any other rank, and runs the broadcast to its end at once, since its kernel, a root,
// reads its buffer without waiting. The decorator gives the inner forward a copy of W (hidden
// from the memory meter): the owner's panel may be its W block itself, which the broadcast now
// writes into, and the harness's W must stay as it was for backward and the re-runs.
struct panel_state {
  bool active = false;  // forward runs
  const par::run_case* c = nullptr;
  const par::any_matrix* w = nullptr;  // this rank's W block, as the harness holds it
  int row = 0, col = 0;                // this rank's mesh coordinates
  std::int64_t next_lo = 0;            // the first K index of the next W panel
};

class w_panel_wrong_row_kernel final : public kernel_decorator {
 public:
  w_panel_wrong_row_kernel(const par::kernel& inner, std::string name,
                           std::shared_ptr<fire_log> log, std::shared_ptr<panel_state> state)
      : kernel_decorator(inner, std::move(name), std::move(log)), state_(std::move(state)) {}
  void forward(par::context& ctx, const par::run_case& c,
               const par::forward_io& io) const override {
    const off_meter hide(bytes_of(io.ws));
    matrices ws(io.ws.begin(), io.ws.end());
    const forward_scope<panel_state> scope{*state_};
    *state_ = {true, &c, &io.ws[0], ctx.grid.coords()[0], ctx.grid.coords()[1], 0};
    inner_.forward(ctx, c, par::forward_io{io.x, view(ws), io.y});
  }

 private:
  std::shared_ptr<panel_state> state_;
};

class w_panel_wrong_row_layer final : public finishes_at_start {
 public:
  w_panel_wrong_row_layer(std::unique_ptr<par::collectives> inner, std::shared_ptr<fire_log> log,
                          std::shared_ptr<panel_state> state)
      : finishes_at_start(std::move(inner), std::move(log)), state_(std::move(state)) {}
  void start(const call& c) override {
    if (!state_->active || c.kind != collective::broadcast) return inner().start(c);
    const par::run_case& rc = *state_->c;
    const std::int64_t lo = state_->next_lo;
    const std::int64_t hi = par::summa_panel_end(rc.part("K"), rc.part("K@1"), lo);
    state_->next_lo = hi;
    if (size() < 2) return inner().start(c);
    fired();
    call moved = c;
    moved.root = (c.root + 1) % size();
    if (rank() == moved.root) pack(c, lo, hi);
    if (rank() == c.root) return finish(moved);
    inner().start(moved);
  }

 private:
  // This row's W rows at panel [lo, hi)'s offset in the owner's block, into c's buffer.
  void pack(const call& c, std::int64_t lo, std::int64_t hi) const {
    const par::run_case& rc = *state_->c;
    const par::partition& ks = rc.part("K");
    const auto ki = static_cast<std::size_t>(ks.size(state_->row));
    const auto nj = static_cast<std::size_t>(rc.part("N@1").size(state_->col));
    const auto kk = static_cast<std::size_t>(hi - lo);
    const auto from = static_cast<std::size_t>(lo - ks.offset(ks.owner(lo)));
    if (static_cast<std::size_t>(c.count) != kk * nj) return;
    const bool out_in = rc.prob.layout == weight_layout::out_in;
    std::visit(
        [&](const auto& w) {
          using T = typename std::decay_t<decltype(w.data)>::value_type;
          auto* buf = static_cast<T*>(c.out);
          const auto k_of = [&](std::size_t u) { return (from + u) % ki; };
          for (std::size_t q = 0; q < nj; ++q)
            for (std::size_t u = 0; u < kk; ++u) {
              const T v = ki == 0 ? T(0) : out_in ? w.row(q)[k_of(u)] : w.row(k_of(u))[q];
              buf[out_in ? q * kk + u : u * nj + q] = v;
            }
        },
        *state_->w);
  }
  std::shared_ptr<panel_state> state_;
};

// dw_over_world: dW all-reduced over the whole mesh instead of the dp axis. The layer sits above
// the checker on axis 0 (the dp axis, whose only collective is dW's all-reduce) and sends the
// call to the top of the whole mesh's stack (a pass-through layer there, built first by the
// mesh, lends it), so that the whole mesh's checker records it on axis −1, as a kernel calling
// that comm would. The ranks' dW differ in size (their stages' layers): each buffer is padded to
// the largest on the mesh (its length agreed with one MPI_Allreduce beside the stacks), in
// scratch the meter does not see.
struct world_slot {
  par::collectives* top = nullptr;  // the whole mesh's, of the mesh being built
};

class dw_over_world_layer final : public fault_layer {
 public:
  dw_over_world_layer(std::unique_ptr<par::collectives> inner, std::shared_ptr<fire_log> log,
                      par::collectives* world)
      : fault_layer(std::move(inner), std::move(log)), world_(world) {}
  traffic run(const call& c) override {
    if (c.kind != collective::all_reduce || world_ == nullptr) return inner().run(c);
    if (world_->size() != size()) fired();
    std::int64_t n = c.count;
    {
      const mem::mpi_heap in_mpi;
      par::check_mpi(
          MPI_Allreduce(MPI_IN_PLACE, &n, 1, MPI_INT64_T, MPI_MAX, world_->native_handle()),
          "MPI_Allreduce");
    }
    const std::size_t es = c.elem_bytes(), mine = static_cast<std::size_t>(c.count) * es;
    padded_.assign(static_cast<std::size_t>(n) * es, std::byte{0});
    if (mine > 0) std::memcpy(padded_.data(), c.out, mine);
    call whole = c;
    whole.out = padded_.data();
    whole.count = n;
    (void)world_->run(whole);
    if (mine > 0) std::memcpy(c.out, padded_.data(), mine);
    return {};
  }

 private:
  par::collectives* world_;
  untracked_vector<std::byte> padded_;
};

template <class Layer, class State>
par::layer_wrapper on_axis0(par::layer_position where, std::shared_ptr<fire_log> log,
                            std::shared_ptr<State> state) {
  return [where, log = std::move(log), state = std::move(state)](
             std::unique_ptr<par::collectives> inner, par::layer_position at,
             int axis) -> std::unique_ptr<par::collectives> {
    if (at != where || axis != 0) return inner;
    return std::make_unique<Layer>(std::move(inner), log, state);
  };
}
}  // namespace

algorithm_mutant make_algorithm_mutant(const std::string& op, const par::kernel& host,
                                       const std::string& name, std::shared_ptr<fire_log> log) {
  using par::layer_position;
  if (op == "ignores_bucket") return {std::make_unique<ignores_bucket>(host, name, log), {}};
  if (op == "padded_buckets") return {std::make_unique<padded_buckets>(host, name, log), {}};
  if (op == "keeps_activations") return {std::make_unique<keeps_activations>(host, name, log), {}};
  if (op == "skips_zeros") return {std::make_unique<skips_zeros>(host, name, log), {}};
  if (op == "reuses_buffer") {
    auto state = std::make_shared<reuse_state>();
    return {std::make_unique<reuses_buffer_kernel>(host, name, log, state),
            on_axis0<reuses_buffer_layer>(layer_position::below, log, state)};
  }
  if (op == "w_panel_wrong_row") {
    auto state = std::make_shared<panel_state>();
    return {std::make_unique<w_panel_wrong_row_kernel>(host, name, log, state),
            on_axis0<w_panel_wrong_row_layer>(layer_position::above, log, state)};
  }
  if (op == "dw_over_world") {
    auto slot = std::make_shared<world_slot>();
    par::layer_wrapper wrap = [log, slot](std::unique_ptr<par::collectives> inner,
                                          layer_position at,
                                          int axis) -> std::unique_ptr<par::collectives> {
      if (at != layer_position::above) return inner;
      if (axis == -1) {
        auto tap = std::make_unique<fault_layer>(std::move(inner), nullptr);
        slot->top = tap.get();
        return tap;
      }
      if (axis != 0) return inner;
      return std::make_unique<dw_over_world_layer>(std::move(inner), log, slot->top);
    };
    return {std::make_unique<kernel_decorator>(host, name, log), std::move(wrap)};
  }
  return {};
}

}  // namespace shardcheck::prop::mutants
