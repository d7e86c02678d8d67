#include "strategies/pipeline.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#include "shardcheck/reference/gemm.hpp"
#include "shardcheck/reference/stack.hpp"
#include "strategies/mixed_ops.hpp"

namespace shardcheck::par {

namespace {

constexpr int dp_axis = 0, pp_axis = 1, tp_axis = 2;

// One step of a stage's schedule: the forward or the backward of micro-batch `mb`.
struct op {
  bool forward = true;
  std::int64_t mb = 0;
};

// Stage s of `stages` with m micro-batches. training = false: the forwards alone.
std::vector<op> schedule_of(pipeline_schedule kind, bool training, int stages, int s,
                            std::int64_t m) {
  std::vector<op> out;
  out.reserve(static_cast<std::size_t>(training ? 2 * m : m));
  if (!training || kind == pipeline_schedule::gpipe) {
    for (std::int64_t i = 0; i < m; ++i) out.push_back({true, i});
    if (training)
      for (std::int64_t i = 0; i < m; ++i) out.push_back({false, i});
    return out;
  }
  const std::int64_t warm = std::min<std::int64_t>(stages - s - 1, m);
  for (std::int64_t i = 0; i < warm; ++i) out.push_back({true, i});
  for (std::int64_t k = 0; k + warm < m; ++k) {
    out.push_back({true, warm + k});
    out.push_back({false, k});
  }
  for (std::int64_t i = m - warm; i < m; ++i) out.push_back({false, i});
  return out;
}

// The name of width d_j (j = 0 … L) of case c's stack: K, H, H2, …, N.
std::string width_name(const run_case& c, std::size_t j) {
  const std::size_t layers = c.prob.layers();
  const bool out_in = c.prob.layout == weight_layout::out_in;
  const auto names = dim_names(tensor_slot{tensor::w, j < layers ? j : layers - 1}, c.prob);
  if (j < layers) return out_in ? names.second : names.first;  // layer j's input
  return out_in ? names.first : names.second;                  // the last layer's output
}

std::string tp_key(const run_case& c, std::size_t j) { return width_name(c, j) + "@2"; }

partition stage_partition(const run_case& c, int stages) {
  const auto it = c.parts.find("L");
  if (it != c.parts.end() && it->second.parts() == stages) return it->second;
  return partition::balanced(static_cast<std::int64_t>(c.prob.layers()), stages);
}

// Everything one rank of a case needs to know about its stage, micro-batches and widths.
struct plan {
  int dp = 1, pp = 1, tp = 1;
  int d = 0, s = 0, t = 0;  // coordinates
  std::size_t layers = 1;
  std::size_t l0 = 0, l1 = 0;  // this stage's layers [l0, l1)
  std::int64_t rows = 0;       // this dp rank's rows
  std::int64_t max_rows = 0;   // the largest dp share of the rows
  std::int64_t m = 1;
  std::vector<std::int64_t> mb_off, mb_rows;  // micro-batch i: rows [off, off + rows)
  std::vector<std::int64_t> width;            // boundary j = 0 … L: local width of A_j (A_L = Y)
  std::vector<std::int64_t> full;             // d_j
  std::size_t es = 8;

  // Layer l is a row layer (split on its inputs, partial sums all-reduced over tp).
  [[nodiscard]] bool row_layer(std::size_t l) const { return tp > 1 && l % 2 == 1; }
  // Layer l's backward gives a partial dA_{l}, all-reduced over tp (a column layer).
  [[nodiscard]] bool column_layer(std::size_t l) const { return tp > 1 && l % 2 == 0; }
  [[nodiscard]] std::int64_t in_w(std::size_t l) const { return width[l]; }
  [[nodiscard]] std::int64_t out_w(std::size_t l) const {
    return row_layer(l) ? full[l + 1] : width[l + 1];
  }
  [[nodiscard]] std::int64_t max_mb() const {
    return mb_rows.empty() ? 0 : *std::max_element(mb_rows.begin(), mb_rows.end());
  }
  // The boundaries a micro-batch's forward leaves on this stage for its backward: A_l0 … A_l1,
  // without Y (A_L), which the backward does not read.
  [[nodiscard]] std::size_t kept_boundaries() const { return l1 - l0 + (l1 == layers ? 0 : 1); }
};

plan make_plan(const run_case& c, std::span<const int> coords, const std::vector<int>& dims,
               std::int64_t m) {
  plan p;
  p.mb_off.reserve(static_cast<std::size_t>(m));
  p.mb_rows.reserve(static_cast<std::size_t>(m));
  p.width.reserve(c.prob.layers() + 1);
  p.full.reserve(c.prob.layers() + 1);
  p.dp = dims[dp_axis];
  p.pp = dims[pp_axis];
  p.tp = dims[tp_axis];
  p.d = coords[dp_axis];
  p.s = coords[pp_axis];
  p.t = coords[tp_axis];
  p.layers = c.prob.layers();
  const partition& stages = c.part("L");  // no copy: the plan's vectors are all it allocates
  p.l0 = static_cast<std::size_t>(stages.offset(p.s));
  p.l1 = p.l0 + static_cast<std::size_t>(stages.size(p.s));
  p.rows = p.dp > 1 ? c.part("M").size(p.d) : c.prob.M;
  p.max_rows = p.dp > 1 ? c.part("M").max_size() : c.prob.M;
  p.m = m;
  for (int i = 0; i < m; ++i) {
    const auto [off, n] = balanced_chunk(p.rows, static_cast<int>(m), i);
    p.mb_off.push_back(off);
    p.mb_rows.push_back(n);
  }
  for (std::size_t j = 0; j <= p.layers; ++j) {
    const std::int64_t d = j == 0 ? c.prob.K : j == p.layers ? c.prob.N : c.prob.hidden[j - 1];
    p.full.push_back(d);
    // A column layer's output (odd boundary j) is sharded over tp, except Y when L is even.
    const bool sharded = p.tp > 1 && j % 2 == 1;
    p.width.push_back(sharded ? c.part(tp_key(c, j)).size(p.t) : d);
  }
  p.es = size_of(c.prob.type);
  return p;
}

std::int64_t param_or(const run_case& c, const char* name, std::int64_t fallback) {
  const auto it = c.params.find(name);
  return it == c.params.end() ? fallback : it->second;
}

// The deepest reduction behind a tp all-reduce of at most `count` elements.
std::int64_t tp_depth(const run_case& c, int tp, std::int64_t count) {
  return tp > 1 ? reduction_depth(c.backend, collective::all_reduce, tp, count) : 0;
}

// Room for one span per layer of a stage (a stack has at most pipeline's max_layers).
template <class T>
using max_stage_spans = std::array<std::span<wide_t<T>>, 8>;

// Runs one rank's schedule.
template <class T>
class stage_runner {
 public:
  // training: the step keeps activations from each micro-batch's forward to its backward.
  stage_runner(context& ctx, const run_case& c, const plan& pl, weights<T> ws, bool training)
      : c_(c),
        pl_(pl),
        ws_(ws),
        grid_(ctx.grid),
        held_(training ? static_cast<std::size_t>(pl.m) : 0) {}
  stage_runner(const stage_runner&) = delete;
  stage_runner& operator=(const stage_runner&) = delete;
  ~stage_runner() {
    // Only after an exception: a message still in flight is let go (MPI cannot cancel a send
    // for sure, and waiting could wait for ever), and every buffer it may still read is leaked
    // rather than freed under it.
    bool in_flight = false;
    for (MPI_Request* r : {&fwd_req_, &bwd_req_}) {
      if (*r == MPI_REQUEST_NULL) continue;
      int done = 0;
      MPI_Test(r, &done, MPI_STATUS_IGNORE);
      if (done == 0) {
        MPI_Request_free(r);
        in_flight = true;
      }
    }
    if (in_flight) {
      new auto(std::move(held_));
      new auto(std::move(fwd_owned_));
      new auto(std::move(bwd_owned_));
    }
  }

  // Micro-batch i's boundaries, kept from its forward to its backward.
  std::vector<matrix<T>>& held(std::int64_t i) { return held_[idx(i)]; }

  // The forward of micro-batch i on this stage: its boundaries A_l0 … A_l1 (Y for the last).
  std::vector<matrix<T>> forward(std::int64_t i, const matrix<T>& x) {
    const auto r = static_cast<std::size_t>(pl_.mb_rows[idx(i)]);
    std::vector<matrix<T>> a;
    a.reserve(pl_.l1 - pl_.l0 + 1);
    a.emplace_back(r, static_cast<std::size_t>(pl_.width[pl_.l0]));
    if (pl_.s == 0)
      copy_rows(x, pl_.mb_off[idx(i)], a.back());
    else
      receive(a.back(), pl_.s - 1, i, "activations");
    for (std::size_t l = pl_.l0; l < pl_.l1; ++l) {
      const matrix<T>& w = ws_[l];
      matrix<T> h(r, static_cast<std::size_t>(pl_.out_w(l)));
      {
        // A 16-bit layer sums (and all-reduces over tp) in f32, then stores its output in T.
        mixed::partial<T> hp(h);
        mixed::forward<T>(c_.prob.layout, r, h.cols, a.back().cols, a.back().data.data(),
                          w.data.data(), hp.data());
        if (pl_.row_layer(l)) grid_.axis(tp_axis).all_reduce_sum<wide_t<T>>(hp.span());
        if (l + 1 < pl_.layers) ref::activate<wide_t<T>>(c_.prob.act, hp.span());
        hp.round();
      }
      a.push_back(std::move(h));
    }
    return a;
  }

  // Sends micro-batch i's output (a.back()) to the next stage. If `keep`, a stays alive until the
  // send completes (the stage keeps it for the backward); otherwise the runner takes the buffer.
  void send_forward(std::int64_t i, std::vector<matrix<T>>& a, bool keep) {
    if (pl_.s + 1 == pl_.pp) return;
    grid_.axis(pp_axis).wait_send(fwd_req_);
    const matrix<T>* out = &a.back();
    if (!keep) {
      fwd_owned_ = std::move(a.back());
      out = &fwd_owned_;
    }
    fwd_mb_ = i;
    fwd_req_ = grid_.axis(pp_axis).start_send<T>(out->span(), pl_.s + 1, tag(i));
  }

  // The backward of micro-batch i from its kept boundaries a, freeing each once read; dy: this
  // rank's rows of dY (last stage); accumulates dW into dws; returns dA_l0 (dX's rows on stage 0).
  matrix<T> backward(std::int64_t i, std::vector<matrix<T>>& a, const matrix<T>& dy,
                     gradients<T> dws) {
    const auto r = static_cast<std::size_t>(pl_.mb_rows[idx(i)]);
    // Micro-batch i's output may still be on its way to the next stage (which has answered).
    if (fwd_req_ != MPI_REQUEST_NULL && fwd_mb_ == i) grid_.axis(pp_axis).wait_send(fwd_req_);
    matrix<T> g(r, static_cast<std::size_t>(pl_.width[pl_.l1]));
    if (pl_.s + 1 == pl_.pp)
      copy_rows(dy, pl_.mb_off[idx(i)], g);
    else
      receive(g, pl_.s + 1, i, "gradients");
    for (std::size_t l = pl_.l1; l-- > pl_.l0;) {
      const matrix<T>& w = ws_[l];
      const std::size_t in = static_cast<std::size_t>(pl_.in_w(l));
      matrix<T> gin(r, in);
      if constexpr (is_16bit_v<T>) {
        // f32 copies of the stored tensors; dW accumulates in f32 (dw32_), dA is stored in T.
        auto g32 = mixed::widen(g.data.data(), g.data.size());
        if (l + 1 < pl_.layers) {
          const matrix<T>& out = a[l + 1 - pl_.l0];
          const auto a32 = mixed::widen(out.data.data(), out.data.size());
          ref::activate_backward<float>(c_.prob.act, std::span<const float>(a32.data(), a32.size()),
                                        std::span<float>(g32.data(), g32.size()));
        }
        {
          const matrix<T>& inp = a[l - pl_.l0];
          const auto in32 = mixed::widen(inp.data.data(), inp.data.size());
          ref::linear_backward_dw<float>(c_.prob.layout, r, g.cols, in, g32.data(), in32.data(),
                                         dw32_[l - pl_.l0].data(), true);
        }
        mixed::partial<T> gp(gin);
        const auto w32 = mixed::widen(w.data.data(), w.data.size());
        ref::linear_backward_dx<float>(c_.prob.layout, r, g.cols, in, g32.data(), w32.data(),
                                       gp.data());
        if (pl_.column_layer(l)) grid_.axis(tp_axis).all_reduce_sum<float>(gp.span());
        gp.round();
      } else {
        if (l + 1 < pl_.layers)
          ref::activate_backward<T>(c_.prob.act, a[l + 1 - pl_.l0].span(), g.span());
        matrix<T>& dw = dws[l];
        ref::linear_backward_dw<T>(c_.prob.layout, r, g.cols, in, g.data.data(),
                                   a[l - pl_.l0].data.data(), dw.data.data(), true);
        ref::linear_backward_dx<T>(c_.prob.layout, r, g.cols, in, g.data.data(), w.data.data(),
                                   gin.data.data());
        if (pl_.column_layer(l)) grid_.axis(tp_axis).all_reduce_sum<T>(gin.span());
      }
      g = std::move(gin);
      a.resize(l - pl_.l0 + 1);  // A_{l+1} is no longer needed
    }
    return g;
  }

  // A 16-bit step's dW accumulators (f32, zeroed), one per layer of this stage; its dW
  // afterwards: dws rounded from them (after the dp all-reduce, in f32).
  void start_dw16(gradients<T> dws) {
    if constexpr (is_16bit_v<T>) {
      for (std::size_t l = pl_.l0; l < pl_.l1; ++l) dw32_.emplace_back(dws[l].data.size(), 0.0f);
    } else {
      (void)dws;
    }
  }
  // The dW sums to all-reduce, one span per layer of this stage (in `out`, no allocation).
  [[nodiscard]] std::span<const std::span<wide_t<T>>> dw_sums(gradients<T> dws,
                                                              max_stage_spans<T>& out) {
    std::size_t n = 0;
    for (std::size_t l = pl_.l0; l < pl_.l1; ++l) {
      if constexpr (is_16bit_v<T>)
        out.at(n++) = std::span<float>(dw32_[l - pl_.l0].data(), dw32_[l - pl_.l0].size());
      else
        out.at(n++) = dws[l].span();
    }
    return {out.data(), n};
  }
  void finish_dw16(gradients<T> dws) {
    if constexpr (is_16bit_v<T>) {
      for (std::size_t l = pl_.l0; l < pl_.l1; ++l)
        ref::narrow<T>(dw32_[l - pl_.l0].data(), dw32_[l - pl_.l0].size(), dws[l].data.data());
    } else {
      (void)dws;
    }
  }

  void send_backward(std::int64_t i, matrix<T> g) {
    grid_.axis(pp_axis).wait_send(bwd_req_);
    bwd_owned_ = std::move(g);
    bwd_req_ = grid_.axis(pp_axis).start_send<T>(bwd_owned_.span(), pl_.s - 1, tag(i));
  }

  // Completes the messages in flight.
  void finish() {
    grid_.axis(pp_axis).wait_send(fwd_req_);
    grid_.axis(pp_axis).wait_send(bwd_req_);
  }
  // Throws if a message had the wrong size; called once this rank's collectives are all done,
  // so that no peer waits in one for a rank that left.
  void report() const {
    if (!error_.empty()) throw error(error_);
  }

  // to = from's rows [row0, row0 + to.rows).
  static void copy_rows(const matrix<T>& from, std::int64_t row0, matrix<T>& to) {
    if (to.data.empty()) return;
    std::memcpy(to.data.data(), from.row(static_cast<std::size_t>(row0)),
                to.data.size() * sizeof(T));
  }
  // to's rows [row0, row0 + from.rows) = from.
  static void copy_into_rows(const matrix<T>& from, matrix<T>& to, std::int64_t row0) {
    if (from.data.empty()) return;
    std::memcpy(to.row(static_cast<std::size_t>(row0)), from.data.data(),
                from.data.size() * sizeof(T));
  }

 private:
  static std::size_t idx(std::int64_t i) { return static_cast<std::size_t>(i); }
  static int tag(std::int64_t i) { return static_cast<int>(i % comm::max_p2p_tag); }

  // A message of the wrong size is noted and the schedule goes on, so that every rank finishes
  // it and no neighbour waits for ever; finish() reports it.
  void receive(matrix<T>& into, int from, std::int64_t i, const char* what) {
    const std::int64_t got = grid_.axis(pp_axis).recv<T>(into.span(), from, tag(i));
    const auto want = static_cast<std::int64_t>(into.data.size());
    if (got == want || !error_.empty()) return;
    error_ = "pipeline stage " + std::to_string(pl_.s);
    error_ += " received ";
    error_ += got > want ? "more than " + std::to_string(want) : std::to_string(got);
    error_ += " elements of micro-batch " + std::to_string(i) + "'s " + what + " from stage " +
              std::to_string(from) + ", expected " + std::to_string(want);
  }

  const run_case& c_;
  const plan& pl_;
  weights<T> ws_;
  mesh& grid_;
  MPI_Request fwd_req_ = MPI_REQUEST_NULL, bwd_req_ = MPI_REQUEST_NULL;
  std::int64_t fwd_mb_ = -1;
  matrix<T> fwd_owned_, bwd_owned_;
  std::vector<std::vector<matrix<T>>> held_;      // per micro-batch (the training step)
  std::vector<mem::tracked_vector<float>> dw32_;  // a 16-bit step's dW sums, per layer
  std::string error_;
};

// dW of every layer of this rank in one buffer, all-reduced over the dp axis (one collective).
template <class T>
void all_reduce_dw(std::span<const std::span<T>> dws, comm& dp) {
  std::int64_t total = 0;
  for (const std::span<T>& dw : dws) total += static_cast<std::int64_t>(dw.size());
  mem::tracked_vector<T> flat(static_cast<std::size_t>(total));
  T* at = flat.data();
  for (const std::span<T>& dw : dws) at = std::copy(dw.begin(), dw.end(), at);
  dp.all_reduce_sum<T>(std::span<T>(flat.data(), flat.size()));
  const T* from = flat.data();
  for (const std::span<T>& dw : dws) {
    std::copy(from, from + dw.size(), dw.begin());
    from += dw.size();
  }
}

}  // namespace

pipeline::pipeline(pipeline_schedule sched, bool hybrid) : schedule_(sched), hybrid_(hybrid) {
  info_.name = hybrid                              ? "hybrid_mesh"
               : sched == pipeline_schedule::gpipe ? "pipeline_gpipe"
                                                   : "pipeline_1f1b";
  info_.summary = hybrid ? "dp × pp × tp mesh: data parallel over dp, the column→row pairs "
                           "over tp, a 1F1B pipeline over pp; dW all-reduced over dp only"
                  : sched == pipeline_schedule::gpipe
                      ? "pipeline of stages (part.L), m micro-batches, GPipe: all "
                        "forwards then all backwards"
                      : "pipeline of stages (part.L), m micro-batches, 1F1B: at most "
                        "min(m, p − s) micro-batches held on stage s";
  if (hybrid) {
    param_spec dp{"dp", 1, 64, 1, "data-parallel ranks (a factor of p)"};
    dp.divides_p = true;
    param_spec tp{"tp", 1, 64, 1, "tensor-parallel ranks (a factor of p/dp); pp = p/(dp·tp)"};
    tp.divides_p = true;
    info_.params.push_back(dp);
    info_.params.push_back(tp);
  }
  info_.params.push_back({"m", 1, 16, 4, "micro-batches per step (each dp rank's rows, balanced)"});
  info_.max_layers = 6;
  // bf16 / f16 with f32 sums and f32 reductions only; the boundaries travel in the storage dtype.
  info_.dtypes.insert(info_.dtypes.end(), {dtype::bf16, dtype::f16});
  info_.policies = {f32_policy};
  // The pipeline alone sends point-to-point only; the hybrid mesh all-reduces over tp and dp.
  info_.uses_collectives = hybrid;
}

std::vector<int> pipeline::mesh_dims(const run_case& c) const {
  if (!hybrid_) return {1, c.p, 1};
  const auto dp = static_cast<int>(param_or(c, "dp", 1)),
             tp = static_cast<int>(param_or(c, "tp", 1));
  if (dp < 1 || tp < 1 || c.p % (dp * tp) != 0)
    throw invalid_problem(info_.name + ": dp·tp = " + std::to_string(dp * tp) +
                          " must divide p=" + std::to_string(c.p));
  return {dp, c.p / (dp * tp), tp};
}

std::vector<split> pipeline::extra_splits(const run_case& c) const {
  return {{"L", static_cast<std::int64_t>(c.prob.layers()), mesh_dims(c)[pp_axis]}};
}

layout pipeline::placement(tensor_slot t, const run_case& c) const {
  const auto dims = mesh_dims(c);
  if (t.t == tensor::w || t.t == tensor::dw) {
    const partition stages = stage_partition(c, dims[pp_axis]);
    auto on_tp = placement::R();
    if (dims[tp_axis] > 1) {
      // A column layer (even) is split on its outputs, a row layer on its inputs.
      const bool outputs = t.layer % 2 == 0, out_in = c.prob.layout == weight_layout::out_in;
      on_tp = placement::S(outputs == out_in ? 0 : 1);
    }
    return {placement::R(), placement::On(stages.owner(static_cast<std::int64_t>(t.layer))), on_tp};
  }
  const auto rows = dims[dp_axis] > 1 ? placement::S(0) : placement::R();
  if (t.t == tensor::x || t.t == tensor::dx) return {rows, placement::On(0), placement::R()};
  // Y: the last layer's outputs, sharded over tp when it is a column layer (L odd).
  const bool sharded = dims[tp_axis] > 1 && c.prob.layers() % 2 == 1;
  return {rows, placement::On(dims[pp_axis] - 1), sharded ? placement::S(1) : placement::R()};
}

// Each dp rank's rows (all M without data parallelism) in m balanced micro-batches, as make_plan
// cuts them.
std::pair<int, int> pipeline::micro_batch_of(const run_case& c, std::int64_t row) const {
  const auto m = static_cast<int>(c.param("m"));
  std::int64_t off = 0, rows = c.prob.M;
  if (mesh_dims(c)[dp_axis] > 1) {
    const partition& parts = c.part("M");
    for (int d = 0; d < parts.parts(); ++d)
      if (row >= parts.offset(d) && row < parts.offset(d) + parts.size(d)) {
        off = parts.offset(d);
        rows = parts.size(d);
      }
  }
  for (int i = 0; i < m; ++i) {
    const auto [lo, n] = balanced_chunk(rows, m, i);
    if (row - off >= lo && row - off < lo + n) return {i, m};
  }
  return {-1, m};
}

claims pipeline::cost(const run_case& c, std::span<const int> coords) const {
  const plan pl = make_plan(c, coords, mesh_dims(c), c.param("m"));
  const auto es = static_cast<std::int64_t>(pl.es);
  // The tp and dp all-reduces carry f32 partials in a bf16 / f16 case (acc=f32 reduce=f32).
  const std::size_t er = mixed::reduce_bytes(c);
  claims e;
  auto& log = e.collectives.emplace();
  auto& peak = e.peak.emplace();
  auto& chains = e.chains.emplace();
  auto on = [](ledger_entry x, int axis) {
    x.axis = axis;
    return x;
  };
  // Messages and collectives, in schedule order.
  auto walk = [&](bool training, std::vector<ledger_entry>& out) {
    for (const op& o : schedule_of(schedule_, training, pl.pp, pl.s, pl.m)) {
      const std::int64_t r = pl.mb_rows[static_cast<std::size_t>(o.mb)];
      if (o.forward) {
        if (pl.s > 0) out.push_back(on(recv_entry(r * pl.width[pl.l0], pl.s - 1, pl.es), pp_axis));
        for (std::size_t l = pl.l0; l < pl.l1; ++l)
          if (pl.row_layer(l))
            out.push_back(
                on(all_reduce_entry(c.backend, r * pl.full[l + 1], pl.t, pl.tp, er), tp_axis));
        if (pl.s + 1 < pl.pp)
          out.push_back(on(send_entry(r * pl.width[pl.l1], pl.s + 1, pl.es), pp_axis));
      } else {
        if (pl.s + 1 < pl.pp)
          out.push_back(on(recv_entry(r * pl.width[pl.l1], pl.s + 1, pl.es), pp_axis));
        for (std::size_t l = pl.l1; l-- > pl.l0;)
          if (pl.column_layer(l))
            out.push_back(
                on(all_reduce_entry(c.backend, r * pl.full[l], pl.t, pl.tp, er), tp_axis));
        if (pl.s > 0) out.push_back(on(send_entry(r * pl.width[pl.l0], pl.s - 1, pl.es), pp_axis));
      }
    }
  };
  walk(false, log.forward);
  walk(true, log.backward);
  std::int64_t dw_elems = 0;  // this rank's dW, all its layers
  for (std::size_t l = pl.l0; l < pl.l1; ++l) dw_elems += pl.in_w(l) * pl.out_w(l);
  if (pl.dp > 1)
    log.backward.push_back(on(all_reduce_entry(c.backend, dw_elems, pl.d, pl.dp, er), dp_axis));

  // Memory, in elements of the largest micro-batch (R rows), plus the bookkeeping: the plan's
  // and the schedule's vectors, and each micro-batch's vector of boundaries.
  const std::int64_t R = pl.max_mb();
  const bool last = pl.s + 1 == pl.pp, first = pl.s == 0;
  std::int64_t boundaries = 0, widest = 0;
  for (std::size_t j = pl.l0; j <= pl.l1; ++j) {
    boundaries += pl.width[j];
    widest = std::max(widest, pl.width[j]);
  }
  const auto book_mb = static_cast<std::int64_t>((pl.l1 - pl.l0 + 1) * sizeof(matrix<double>));
  const auto book = static_cast<std::int64_t>(
      (2 * static_cast<std::size_t>(pl.m) + 2 * (pl.layers + 1)) * sizeof(std::int64_t) +
      2 * static_cast<std::size_t>(pl.m) * sizeof(op));
  // Forward: Y's rows (last stage), one micro-batch's boundaries A_l0 … A_l1, and the previous
  // micro-batch's output, still being sent.
  const std::int64_t y_elems = last ? pl.rows * pl.width[pl.layers] : 0;
  const std::int64_t out_message = last ? 0 : R * pl.width[pl.l1];
  peak.forward = (y_elems + R * boundaries + out_message) * es + book_mb + book;
  // Backward (one training step): the boundaries kept for each micro-batch held (m for GPipe,
  // min(m, pp − s) for 1F1B, the one in its forward or backward included); a forward's Y rows
  // (not kept) or a backward's gradient and dA; the messages in flight that nothing else holds
  // (an output not kept, the last dA sent back); dW, dX's rows (first stage) and the buffer dW
  // is all-reduced in (dp > 1).
  std::int64_t kept = 0;
  for (std::size_t j = pl.l0; j < pl.l0 + pl.kept_boundaries(); ++j) kept += pl.width[j];
  const std::int64_t held = schedule_ == pipeline_schedule::one_f_one_b
                                ? std::min<std::int64_t>(pl.m, pl.pp - pl.s)
                                : pl.m;
  const bool y_here = pl.l1 == pl.layers;  // this stage computes Y, which is not kept
  const std::int64_t working = std::max(y_here ? R * pl.width[pl.layers] : 0, 2 * R * widest);
  const std::int64_t messages =
      (y_here && !last ? R * pl.width[pl.layers] : 0) + (first ? 0 : R * pl.width[pl.l0]);
  const std::int64_t outputs = dw_elems * (pl.dp > 1 ? 2 : 1) + (first ? pl.rows * pl.full[0] : 0);
  const auto held_book = pl.m * static_cast<std::int64_t>(sizeof(std::vector<matrix<double>>));
  peak.backward = (held * R * kept + working + messages + outputs) * es + (held + 1) * book_mb +
                  held_book + book;
  if (is_storage16(c.prob.type)) {
    // f32 beside the 16-bit buffers: one layer's product at a time, its operands widened and its
    // f32 output (forward: the input rows, W, H; backward: dA, the boundary masked by, the input
    // rows, W, dA_in), and in backward the step's dW sums (their vector too) and the f32 buffer
    // they are all-reduced in (dp > 1).
    std::int64_t fwd16 = 0, bwd16 = 0;
    for (std::size_t l = pl.l0; l < pl.l1; ++l) {
      const std::int64_t in = pl.in_w(l), out = pl.out_w(l);
      fwd16 = std::max(fwd16, R * in + in * out + R * out);
      bwd16 = std::max(bwd16, 2 * R * out + 2 * R * in + in * out);
    }
    const auto sums_book =
        static_cast<std::int64_t>((pl.l1 - pl.l0) * sizeof(mem::tracked_vector<float>));
    peak.forward += fwd16 * 4;
    peak.backward += (fwd16 + bwd16 + dw_elems * (pl.dp > 1 ? 2 : 1)) * 4 + sums_book;
  }

  // Chains per layer, over the largest micro-batch anywhere (dp shares differ).
  const std::int64_t Rg = (pl.max_rows + pl.m - 1) / pl.m;  // its rows
  for (std::size_t l = 0; l < pl.layers; ++l) {
    chain_lengths ch;
    const bool row = pl.tp > 1 && l % 2 == 1, column = pl.tp > 1 && l % 2 == 0;
    const auto tp_part = [&](std::size_t j) { return c.part(tp_key(c, j)).max_size(); };
    ch.y = row ? tp_part(l) + tp_depth(c, pl.tp, Rg * pl.full[l + 1]) : pl.full[l];
    ch.dx = column ? tp_part(l + 1) + tp_depth(c, pl.tp, Rg * pl.full[l]) : pl.full[l + 1];
    ch.reduced.y = row ? tp_depth(c, pl.tp, Rg * pl.full[l + 1]) : 0;
    ch.reduced.dx = column ? tp_depth(c, pl.tp, Rg * pl.full[l]) : 0;
    // dW_l sums this dp rank's rows into a zeroed dW, micro-batch by micro-batch: whatever the
    // order, a sum of rows + 1 terms chains at most rows of them; then the dp all-reduce.
    ch.reduced.dw =
        pl.dp > 1 ? reduction_depth(c.backend, collective::all_reduce, pl.dp, dw_elems) : 0;
    ch.dw = pl.max_rows + 1 + ch.reduced.dw;
    chains.push_back(ch);
  }
  return e;
}

void pipeline::forward(context& ctx, const run_case& c, const forward_io& io) const {
  io.visit_mixed([&]<class T>(const matrix<T>& x, weights<T> ws, matrix<T>& y) {
    const plan pl = make_plan(c, ctx.grid.coords(), ctx.grid.dims(), c.param("m"));
    const bool last = pl.s + 1 == pl.pp;
    if (last)
      y = matrix<T>(static_cast<std::size_t>(pl.rows),
                    static_cast<std::size_t>(pl.width[pl.layers]));
    stage_runner<T> run(ctx, c, pl, ws, false);
    for (const op& o : schedule_of(schedule_, false, pl.pp, pl.s, pl.m)) {
      std::vector<matrix<T>> a = run.forward(o.mb, x);
      if (last) {
        stage_runner<T>::copy_into_rows(a.back(), y, pl.mb_off[static_cast<std::size_t>(o.mb)]);
      } else {
        run.send_forward(o.mb, a, false);
      }
    }
    run.finish();
    run.report();
  });
}

void pipeline::backward(context& ctx, const run_case& c, const backward_io& io) const {
  io.visit_mixed([&]<class T>(const matrix<T>& x, weights<T> ws, const matrix<T>& dy, matrix<T>& dx,
                              gradients<T> dws) {
    const plan pl = make_plan(c, ctx.grid.coords(), ctx.grid.dims(), c.param("m"));
    for (std::size_t l = pl.l0; l < pl.l1; ++l) dws[l] = matrix<T>(ws[l].rows, ws[l].cols);
    if (pl.s == 0)
      dx = matrix<T>(static_cast<std::size_t>(pl.rows), static_cast<std::size_t>(pl.width[0]));
    stage_runner<T> run(ctx, c, pl, ws, true);
    run.start_dw16(dws);
    for (const op& o : schedule_of(schedule_, true, pl.pp, pl.s, pl.m)) {
      auto& slot = run.held(o.mb);
      if (o.forward) {
        slot = run.forward(o.mb, x);
        // Y (A_L) is not kept; if it leaves this stage the runner holds it until it is sent.
        const bool keep = pl.l1 < pl.layers;
        run.send_forward(o.mb, slot, keep);
        if (!keep) slot.pop_back();
        continue;
      }
      matrix<T> g = run.backward(o.mb, slot, dy, dws);
      std::vector<matrix<T>>().swap(slot);  // its capacity too
      if (pl.s > 0)
        run.send_backward(o.mb, std::move(g));
      else
        stage_runner<T>::copy_into_rows(g, dx, pl.mb_off[static_cast<std::size_t>(o.mb)]);
    }
    run.finish();
    if (pl.dp > 1) {
      max_stage_spans<T> room;
      all_reduce_dw<wide_t<T>>(run.dw_sums(dws, room), ctx.grid.axis(dp_axis));
    }
    run.finish_dw16(dws);
    run.report();
  });
}

}  // namespace shardcheck::par
