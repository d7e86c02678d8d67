#include "strategies/summa.hpp"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "shardcheck/reference/gemm.hpp"
#include "strategies/mixed_ops.hpp"

namespace shardcheck::par {

std::int64_t summa_panel_end(const partition& k_rows, const partition& k_cols, std::int64_t lo) {
  const int a = k_rows.owner(lo), b = k_cols.owner(lo);
  return std::min(k_rows.offset(a) + k_rows.size(a), k_cols.offset(b) + k_cols.size(b));
}

namespace {
// The widest K panel (0 when K = 0).
std::int64_t widest_panel(const partition& k_rows, const partition& k_cols) {
  std::int64_t widest = 0;
  for (std::int64_t lo = 0; lo < k_rows.length();) {
    const std::int64_t hi = summa_panel_end(k_rows, k_cols, lo);
    widest = std::max(widest, hi - lo);
    lo = hi;
  }
  return widest;
}

ledger_entry on_axis(ledger_entry e, int axis) {
  e.axis = axis;
  return e;
}

std::size_t ld(std::int64_t cols) {
  return static_cast<std::size_t>(std::max<std::int64_t>(1, cols));
}

// Panel [lo, hi) as rank (i, j) of a pr × pc mesh takes part in it. The rank reads the panel where
// it lies, and as its root broadcasts it from there, when the axis it travels along has one rank,
// or when the rank is the root and the panel is the whole of its block along K (X: K@1_j; W in
// out_in: K_i; W in in_out, whose panel rows are contiguous, any rows of its own block).
// Otherwise the panel goes through one of the rank's panel buffers.
struct panel {
  std::int64_t lo = 0, hi = 0;
  int jx = 0, iw = 0;  // the owners of its X and W parts: its broadcasts' roots
  bool x_in_place = false, w_in_place = false;
};

panel panel_at(const run_case& c, int i, int j, int pr, int pc, std::int64_t lo) {
  const partition &ks = c.part("K"), &ks1 = c.part("K@1");
  panel t;
  t.lo = lo;
  t.hi = summa_panel_end(ks, ks1, lo);
  t.jx = ks1.owner(lo);
  t.iw = ks.owner(lo);
  const auto whole = [&](const partition& part, int q) {
    return lo == part.offset(q) && t.hi == part.offset(q) + part.size(q);
  };
  t.x_in_place = pc == 1 || (j == t.jx && whole(ks1, j));
  t.w_in_place = pr == 1 || (i == t.iw && (c.prob.layout == weight_layout::in_out || whole(ks, i)));
  return t;
}

// The panel buffers rank (i, j) holds for X and for W: two when two or more of its panels need
// one (the next panel arrives in one while the product reads the other), one when one does.
std::pair<std::int64_t, std::int64_t> panel_buffers(const run_case& c, int i, int j, int pr,
                                                    int pc) {
  std::int64_t x = 0, w = 0;
  for (std::int64_t lo = 0; lo < c.prob.K;) {
    const panel t = panel_at(c, i, j, pr, pc, lo);
    x += t.x_in_place ? 0 : 1;
    w += t.w_in_place ? 0 : 1;
    lo = t.hi;
  }
  return {std::min<std::int64_t>(x, 2), std::min<std::int64_t>(w, 2)};
}
}  // namespace

summa::summa() {
  info_.name = "summa";
  info_.summary =
      "2D SUMMA on a pr × p/pr mesh: X, W, Y block-sharded; K panels broadcast along mesh rows "
      "and columns; backward all-gathers dY and reduce-scatters dX, dW";
  param_spec pr{"pr", 1, 1 << 20, 1, "rows of the pr × (p/pr) mesh; must divide p"};
  pr.divides_p = true;
  info_.params = {pr};
  // bf16 / f16 with f32 sums and f32 reductions only (the panels travel in the storage dtype).
  info_.dtypes.insert(info_.dtypes.end(), {dtype::bf16, dtype::f16});
  info_.policies = {f32_policy};
}

std::vector<int> summa::mesh_dims(const run_case& c) const {
  const std::int64_t pr = c.param("pr");
  if (pr < 1 || c.p % pr != 0)
    throw invalid_problem(info_.name + ": pr=" + std::to_string(pr) +
                          " must divide p=" + std::to_string(c.p));
  return {static_cast<int>(pr), c.p / static_cast<int>(pr)};
}

layout summa::placement(tensor_slot t, const run_case& c) const {
  const bool out_in = c.prob.layout == weight_layout::out_in;
  const layout rows_cols = {placement::S(0), placement::S(1)};
  const layout cols_rows = {placement::S(1), placement::S(0)};
  switch (t.t) {
    case tensor::x:
    case tensor::y:
    case tensor::dy: return rows_cols;
    case tensor::dx: return cols_rows;
    case tensor::w: return out_in ? cols_rows : rows_cols;
    case tensor::dw: return out_in ? rows_cols : cols_rows;
  }
  return {placement::R(), placement::R()};
}

claims summa::cost(const run_case& c, std::span<const int> coords) const {
  const int i = coords[0], j = coords[1];
  const auto dims = mesh_dims(c);
  const int pr = dims[0], pc = dims[1];
  const std::size_t es = size_of(c.prob.type);
  const auto s = static_cast<std::int64_t>(es);
  const partition &rows = c.part("M"), &rows1 = c.part("M@1"), &ks = c.part("K"),
                  &ks1 = c.part("K@1"), &ns = c.part("N"), &ns1 = c.part("N@1");
  const std::int64_t m = c.prob.M, n = c.prob.N;
  const std::int64_t mi = rows.size(i), nj = ns1.size(j), ki = ks.size(i), kj = ks1.size(j);
  claims out;
  auto& log = out.collectives.emplace();
  auto& peak = out.peak.emplace();
  for (std::int64_t lo = 0; lo < c.prob.K;) {
    const std::int64_t hi = summa_panel_end(ks, ks1, lo), kk = hi - lo;
    log.forward.push_back(
        on_axis(broadcast_entry(c.backend, mi * kk, ks1.owner(lo), j, pc, es), 1));
    log.forward.push_back(on_axis(broadcast_entry(c.backend, nj * kk, ks.owner(lo), i, pr, es), 0));
    lo = hi;
  }
  const std::int64_t kmax = widest_panel(ks, ks1);
  const auto [xbufs, wbufs] = panel_buffers(c, i, j, pr, pc);
  peak.forward = (mi * nj + (xbufs * mi + wbufs * nj) * kmax) * s;

  log.backward.push_back(on_axis(all_gather_entry(c.backend, rows.scaled(nj), i, es), 0));
  // The partials reduce-scattered are f32 in a bf16 / f16 case.
  const std::size_t er = mixed::reduce_bytes(c);
  log.backward.push_back(on_axis(reduce_scatter_entry(c.backend, rows1.scaled(ki), j, er), 1));
  log.backward.push_back(on_axis(all_gather_entry(c.backend, ns1.scaled(mi), j, es), 1));
  log.backward.push_back(on_axis(reduce_scatter_entry(c.backend, ns.scaled(kj), i, er), 0));
  // dX phase: gathered dY (M·n_j) with Q (M·k_i), then Q with dX (m@1_j·k_i).
  const std::int64_t gathered = m * nj, q = m * ki, dx = rows1.size(j) * ki;
  const std::int64_t dx_phase = std::max(gathered + q, q + dx);
  // dW phase, dX held: packed dY (m_i·N) with R (N·k@1_j), then R with the reduced block
  // (n_i·k@1_j), and in in_out the reduced block with its transpose.
  const std::int64_t packed = mi * n, r = n * kj, dw = ns.size(i) * kj;
  std::int64_t dw_phase = std::max(packed + r, r + dw);
  if (c.prob.layout == weight_layout::in_out) dw_phase = std::max(dw_phase, 2 * dw);
  peak.backward = std::max(dx_phase, dx + dw_phase) * s;
  if (is_storage16(c.prob.type)) {
    // Beside the 16-bit buffers (as above, at 2 bytes), f32: forward's Y accumulator and both
    // panels widened; backward's Q and R, every operand of their products widened (dY gathered
    // or packed, W, X) and each reduce-scatter's f32 sum, all counted as alive at once.
    peak.forward += (mi * nj + (mi + nj) * kmax) * 4;
    peak.backward += (gathered + nj * ki + q + dx + packed + mi * kj + r + dw) * 4;
  }
  const std::int64_t dx_depth = reduction_depth(c.backend, collective::reduce_scatter, pc, m * ki);
  const std::int64_t dw_depth = reduction_depth(c.backend, collective::reduce_scatter, pr, n * kj);
  out.chains = {{c.prob.K,
                 ns1.max_size() + dx_depth,
                 rows.max_size() + dw_depth,
                 {.dx = dx_depth, .dw = dw_depth}}};
  return out;
}

// Panel after panel, the next panel's two broadcasts are started before this panel's product, so
// that they travel while it runs (a root broadcasting from its own block waits for no copy).
// Example 1 × 2 on 2048³: the X panels are the two ranks' whole 2048 × 1024 blocks, broadcast
// from where they lie; W panels are read straight from W's 1024 × 2048 block at column lo,
// ld = 2048. Rank 1 receives panel 0 into its buffer, then starts broadcasting its own block
// (panel 1) and multiplies panel 0 while it goes.
void summa::forward(context& ctx, const run_case& c, const forward_io& io) const {
  io.visit_mixed([&]<class T>(const matrix<T>& x, weights<T> ws, matrix<T>& y) {
    using A = wide_t<T>;  // the products' dtype: f32 for bf16 / f16 (panels broadcast in T)
    const matrix<T>& w = ws[0];
    comm& column = ctx.grid.axis(0);  // the ranks of this mesh column: varying i
    comm& row = ctx.grid.axis(1);     // the ranks of this mesh row: varying j
    const int i = ctx.grid.coords()[0], j = ctx.grid.coords()[1];
    const int pr = ctx.grid.dims()[0], pc = ctx.grid.dims()[1];
    const partition &ks = c.part("K"), &ks1 = c.part("K@1");
    const bool out_in = c.prob.layout == weight_layout::out_in;
    const auto mi = x.rows, nj = static_cast<std::size_t>(c.part("N@1").size(j));
    const auto kmax = static_cast<std::size_t>(widest_panel(ks, ks1));
    y = matrix<T>(mi, nj);
    mixed::partial<T> acc(y);  // Y summed in A, rounded once at the end
    // Panel buffers, used in turn: mi×kk and kk×nj (out_in: nj×kk) each.
    // (Not a structured binding: the lambdas below capture them.)
    const std::pair<std::int64_t, std::int64_t> bufs = panel_buffers(c, i, j, pr, pc);
    const std::int64_t xbufs = bufs.first, wbufs = bufs.second;
    mem::tracked_vector<T> xb(static_cast<std::size_t>(xbufs) * mi * kmax),
        wb(static_cast<std::size_t>(wbufs) * kmax * nj);
    int x_turn = 0, w_turn = 0;
    // A 16-bit panel widened (dense, its leading dimension kept), once per product.
    mem::tracked_vector<float> xw, ww;
    if constexpr (is_16bit_v<T>) {
      xw.resize(mi * kmax);
      ww.resize(kmax * nj);
    }
    const auto wide = [&](const T* p, std::size_t rows, std::size_t cols, std::size_t ldp,
                          mem::tracked_vector<float>& out) -> const A* {
      if constexpr (is_16bit_v<T>) {
        for (std::size_t r = 0; r < rows; ++r)
          ref::widen<T>(p + r * ldp, cols, out.data() + r * cols);
        return out.data();
      } else {
        (void)rows, (void)cols, (void)ldp, (void)out;
        return p;
      }
    };
    // Where a started panel's operands will be, and their leading dimensions.
    struct operands {
      panel t;
      const T* xa;
      std::size_t lda;
      const T* wa;
      std::size_t ldb;
    };
    // Packs what this rank sends of panel t (as a root reading from a buffer) and starts both
    // broadcasts. A root broadcasting in place hands the collective its own block, as MPI_Bcast's
    // contract allows (the root's buffer is only read); a broadcast that breaks it writes into
    // the kernel's input (bcast_wrong_root, caught in forward, backward and determinism).
    const auto start = [&](const panel& t) {
      const auto kk = static_cast<std::size_t>(t.hi - t.lo);
      operands o{t, nullptr, kk, nullptr, out_in ? kk : nj};
      if (t.x_in_place) {
        o.xa = x.data.empty() ? x.data.data() : x.data.data() + (t.lo - ks1.offset(j));
        o.lda = x.cols;
      } else {
        T* buf = xb.data() + static_cast<std::size_t>(x_turn++ % xbufs) * mi * kmax;
        if (j == t.jx) {
          const auto at = static_cast<std::size_t>(t.lo - ks1.offset(j));
          for (std::size_t r = 0; r < mi; ++r) std::copy_n(x.row(r) + at, kk, buf + r * kk);
        }
        o.xa = buf;
      }
      row.start_broadcast<T>(std::span<T>(const_cast<T*>(o.xa), mi * kk), t.jx);
      if (t.w_in_place) {
        const auto k0 = static_cast<std::size_t>(t.lo - ks.offset(t.iw));
        o.wa = w.data.empty() ? w.data.data() : out_in ? w.data.data() + k0 : w.row(k0);
        o.ldb = w.cols;
      } else {
        T* buf = wb.data() + static_cast<std::size_t>(w_turn++ % wbufs) * kmax * nj;
        if (i == t.iw) {
          const auto k0 = static_cast<std::size_t>(t.lo - ks.offset(i));  // the panel's local K
          if (out_in)  // W rows are N: row q of the panel is W[q, k0…], read along the row
            for (std::size_t q = 0; q < nj; ++q) std::copy_n(w.row(q) + k0, kk, buf + q * kk);
          else  // W rows are K: panel rows are W[k0 + u, :]
            for (std::size_t u = 0; u < kk; ++u) std::copy_n(w.row(k0 + u), nj, buf + u * nj);
        }
        o.wa = buf;
      }
      column.start_broadcast<T>(std::span<T>(const_cast<T*>(o.wa), kk * nj), t.iw);
      return o;
    };
    bool first = true;  // the first product overwrites Y
    std::optional<operands> now;
    if (c.prob.K > 0) now = start(panel_at(c, i, j, pr, pc, 0));
    while (now) {
      const operands o = *now;
      // A rank waits before the product only for what it receives; a root's broadcast goes on.
      if (pc > 1 && j != o.t.jx) row.wait_pending();
      if (pr > 1 && i != o.t.iw) column.wait_pending();
      const bool more = o.t.hi < c.prob.K;
      const auto next = [&] {
        row.wait_pending();
        column.wait_pending();
        return more ? std::optional<operands>(start(panel_at(c, i, j, pr, pc, o.t.hi)))
                    : std::nullopt;
      };
      // The next panel starts before this product when this panel's broadcasts have finished
      // here (one pending call per comm), else right after it.
      now.reset();
      if (more && row.test_pending() && column.test_pending()) now = next();
      const auto kk = static_cast<std::size_t>(o.t.hi - o.t.lo);
      // The widened panels are dense (ld = their width); f32 / f64 read in place.
      const bool b16 = is_16bit_v<T>;
      const A* xs = wide(o.xa, mi, kk, o.lda, xw);
      const A* wsp = out_in ? wide(o.wa, nj, kk, o.ldb, ww) : wide(o.wa, kk, nj, o.ldb, ww);
      const std::size_t lda_a = b16 ? kk : o.lda, ldb_a = b16 ? (out_in ? kk : nj) : o.ldb;
      // Rows [r0, r1) of the product.
      const auto product = [&](std::size_t r0, std::size_t r1) {
        ref::gemm<A>(false, out_in, r1 - r0, nj, kk, A(1), xs + r0 * lda_a,
                     ld(static_cast<std::int64_t>(lda_a)), wsp,
                     ld(static_cast<std::int64_t>(ldb_a)), first ? A(0) : A(1),
                     acc.data() + r0 * nj, ld(static_cast<std::int64_t>(nj)));
      };
      // A broadcast still under way here (this rank its root, or an intermediate rank of the
      // next panel's) moves on only when this rank tests it, so the product goes in quarters of
      // its rows with a test between them. Always quarters, whether or not one is pending: the
      // split must not depend on timing, since OpenBLAS may sum a block of fewer rows in
      // another order (the determinism property caught a split chosen by test_pending).
      const std::size_t quarter = std::max<std::size_t>(1, (mi + 3) / 4);
      for (std::size_t r0 = 0; r0 < mi; r0 += quarter) {
        product(r0, std::min(mi, r0 + quarter));
        if (r0 + quarter < mi) {
          (void)row.test_pending();
          (void)column.test_pending();
        }
      }
      first = false;
      if (!now) now = next();
    }
    if (first) std::fill(acc.span().begin(), acc.span().end(), A(0));  // K = 0: no panel
    acc.round();
  });
}

void summa::backward(context& ctx, const run_case& c, const backward_io& io) const {
  io.visit_mixed([&]<class T>(const matrix<T>& x, weights<T> ws, const matrix<T>& dy, matrix<T>& dx,
                              gradients<T> dws) {
    using A = wide_t<T>;  // Q and R in f32 for bf16 / f16, reduce-scattered in f32
    const matrix<T>& w = ws[0];
    matrix<T>& dw = dws[0];
    comm& column = ctx.grid.axis(0);
    comm& row = ctx.grid.axis(1);
    const int i = ctx.grid.coords()[0], j = ctx.grid.coords()[1];
    const partition &rows = c.part("M"), &rows1 = c.part("M@1"), &ns = c.part("N"),
                    &ns1 = c.part("N@1");
    const weight_layout l = c.prob.layout;
    const auto m = static_cast<std::size_t>(c.prob.M), n = static_cast<std::size_t>(c.prob.N);
    const auto mi = dy.rows, nj = dy.cols;
    const auto ki = static_cast<std::size_t>(c.part("K").size(i)), kj = x.cols;
    {
      // dX (W stationary): dY[:, N@1_j] gathered down the mesh column, Q reduced along the row.
      matrix<T> gathered(m, nj);
      std::copy(dy.data.begin(), dy.data.end(),
                gathered.row(static_cast<std::size_t>(rows.offset(i))));
      column.all_gather<T>(gathered.span(), rows, static_cast<std::int64_t>(nj));
      mem::tracked_vector<A> q(m * ki);
      mixed::backward_dx<T>(l, m, nj, ki, gathered.data.data(), w.data.data(), q.data());
      gathered = matrix<T>();
      dx = matrix<T>(static_cast<std::size_t>(rows1.size(j)), ki);
      mixed::reduce_scatter<T>(row, c, std::span<const A>(q.data(), q.size()), dx.span(), rows1,
                               static_cast<std::int64_t>(ki));
    }
    // dW (X stationary): dY[M_i, :] gathered along the mesh row as packed blocks (block j' is
    // m_i × n_j'), R = dY[M_i, :]ᵀ·X_ij in N×k@1_j, reduced down the mesh column.
    matrix<T> packed(mi, n);
    std::copy(dy.data.begin(), dy.data.end(),
              packed.data.data() + static_cast<std::size_t>(ns1.offset(j)) * mi);
    row.all_gather<T>(packed.span(), ns1, static_cast<std::int64_t>(mi));
    mem::tracked_vector<A> r(n * kj);
    for (int q = 0; q < ns1.parts(); ++q) {
      const auto n0 = static_cast<std::size_t>(ns1.offset(q)),
                 nq = static_cast<std::size_t>(ns1.size(q));
      mixed::backward_dw<T>(weight_layout::out_in, mi, nq, kj, packed.data.data() + n0 * mi,
                            x.data.data(), r.data() + n0 * kj);
    }
    packed = matrix<T>();
    const auto ni = static_cast<std::size_t>(ns.size(i));
    matrix<T> reduced(ni, kj);
    mixed::reduce_scatter<T>(column, c, std::span<const A>(r.data(), r.size()), reduced.span(), ns,
                             static_cast<std::int64_t>(kj));
    mem::tracked_vector<A>().swap(r);
    if (l == weight_layout::out_in) {
      dw = std::move(reduced);
      return;
    }
    dw = matrix<T>(kj, ni);
    for (std::size_t a = 0; a < ni; ++a)
      for (std::size_t b = 0; b < kj; ++b) dw.row(b)[a] = reduced.row(a)[b];
  });
}

}  // namespace shardcheck::par
