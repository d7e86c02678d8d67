#include "strategies/sharded_weights.hpp"

#include <algorithm>
#include <limits>
#include <optional>
#include <vector>

#include "shardcheck/reference/gemm.hpp"
#include "strategies/mixed_ops.hpp"

namespace shardcheck::par {

std::string weight_row_key(const run_case& c) {
  return dim_names(tensor_slot{tensor::w}, c.prob).first;
}

bucket_plan plan_buckets(const run_case& c, std::int64_t bytes) {
  const auto names = dim_names(tensor_slot{tensor::w}, c.prob);
  bucket_plan b;
  b.rows = dim_length(c.prob, names.first);
  b.cols = dim_length(c.prob, names.second);
  // Saturated and divided without a sum, so that no size near INT64_MAX overflows (a row of
  // more bytes than that takes a bucket of its own).
  const auto es = static_cast<std::int64_t>(size_of(c.prob.type));
  const std::int64_t row_bytes = b.cols > std::numeric_limits<std::int64_t>::max() / es
                                     ? std::numeric_limits<std::int64_t>::max()
                                     : b.cols * es;
  b.per_bucket =
      row_bytes == 0 ? b.rows : std::min(b.rows, std::max<std::int64_t>(1, bytes / row_bytes));
  b.count = b.rows == 0 ? 0 : (b.rows - 1) / b.per_bucket + 1;
  return b;
}

bucket_plan plan_buckets(const run_case& c) { return plan_buckets(c, c.param("bucket")); }

sharded_weights::sharded_weights() {
  constexpr std::int64_t whole = std::int64_t{1} << 40;
  info_.name = "sharded_weights";
  info_.summary =
      "W sharded by rows, X by batch rows; W gathered in buckets of at most `bucket` bytes "
      "(double-buffered); dW partials reduce-scattered per bucket";
  info_.params = {
      {"bucket", 1, whole, whole,
       "bytes per W bucket (at least one row); ≥ W's size: all of W at once (baseline)", true},
      {"overlap", 0, 1, 1, "1: gather bucket i+1 while multiplying bucket i; 0: one at a time"}};
  info_.dtypes.insert(info_.dtypes.end(), {dtype::bf16, dtype::f16});
  info_.policies = mixed::reducing_policies();
}

layout sharded_weights::placement(tensor_slot, const run_case&) const { return {placement::S(0)}; }

claims sharded_weights::cost(const run_case& c, std::span<const int> coords) const {
  const int r = coords[0];
  const bucket_plan plan = plan_buckets(c);
  const partition& wrows = c.part(weight_row_key(c));
  const std::size_t es = size_of(c.prob.type), er = mixed::reduce_bytes(c);
  const auto s = static_cast<std::int64_t>(es);
  const bool overlap = c.param("overlap") != 0;
  const std::int64_t mine = c.part("M").size(r);
  auto window = [&](std::int64_t i) {
    std::vector<std::int64_t> counts(static_cast<std::size_t>(c.p));
    for (int q = 0; q < c.p; ++q) {
      const std::int64_t a = std::max(plan.lo(i), wrows.offset(q));
      const std::int64_t b = std::min(plan.hi(i), wrows.offset(q) + wrows.size(q));
      counts[static_cast<std::size_t>(q)] = std::max<std::int64_t>(b - a, 0) * plan.cols;
    }
    return counts;
  };
  claims out;
  auto& log = out.collectives.emplace();
  for (std::int64_t i = 0; i < plan.count; ++i)
    log.forward.push_back(all_gather_entry(c.backend, window(i), r, es));
  for (std::int64_t i = 0; i < plan.count; ++i) {
    if (i == 0 || !overlap) log.backward.push_back(all_gather_entry(c.backend, window(i), r, es));
    if (overlap && i + 1 < plan.count)
      log.backward.push_back(all_gather_entry(c.backend, window(i + 1), r, es));
    log.backward.push_back(reduce_scatter_entry(c.backend, window(i), r, er));
  }
  // The buffers alive at once: bucket i's with bucket i+1's, min(2b, R) rows (overlap=1), or
  // bucket i's alone, b rows.
  const std::int64_t buffers = (overlap ? plan.pair_rows() : plan.per_bucket) * plan.cols * s;
  auto& peak = out.peak.emplace();
  peak.forward = mine * c.prob.N * s + buffers;
  peak.backward = mine * c.prob.K * s + wrows.size(r) * plan.cols * s + buffers;
  if (is_storage16(c.prob.type)) {
    // Beside the 16-bit buffers, f32: the Y (dX) accumulator and X (X, dY) widened, one bucket
    // widened; in backward also the bucket's dW partial, and either its copy rounded to the
    // storage dtype (reduce=storage) or the f32 sums of this rank's whole dW shard (reduce=f32:
    // one buffer for every bucket, so that a smaller bucket never needs more).
    const std::int64_t bucket32 = plan.per_bucket * plan.cols * 4;
    const std::int64_t sums = mixed::reduce_in_storage(c) ? plan.per_bucket * plan.cols * s
                                                          : wrows.size(r) * plan.cols * 4;
    peak.forward += (mine * c.prob.N + mine * c.prob.K) * 4 + bucket32;
    peak.backward += (2 * mine * c.prob.K + mine * c.prob.N) * 4 + 2 * bucket32 + sums;
  }
  const std::int64_t depth = reduction_depth(c.backend, collective::reduce_scatter, c.p, 0);
  out.chains = {{c.prob.K, c.prob.N, c.part("M").max_size() + depth, {.dw = depth}}};
  return out;
}

namespace {

// Streams W's buckets through at most two buffers: acquire(i) returns bucket i gathered (and, with
// overlap, has started bucket i+1's gather into a buffer of its own); release() frees bucket i.
template <class T>
class bucket_stream {
 public:
  bucket_stream(comm& world, const matrix<T>& w, const partition& rows, const bucket_plan& plan,
                bool overlap)
      : world_(world), w_(w), rows_(rows), plan_(plan), overlap_(overlap) {}
  ~bucket_stream() {
    try {
      world_.wait_pending();  // never free a buffer MPI may still write
    } catch (...) {
    }
  }
  bucket_stream(const bucket_stream&) = delete;
  bucket_stream& operator=(const bucket_stream&) = delete;

  const T* acquire(std::int64_t i) {
    if (!overlap_ || i == 0) start(i);
    world_.wait_pending();
    current_ = std::move(next_);
    if (overlap_ && i + 1 < plan_.count) start(i + 1);
    return current_.data();
  }
  void release() { mem::tracked_vector<T>().swap(current_); }

 private:
  void start(std::int64_t i) {
    const std::int64_t lo = plan_.lo(i), hi = plan_.hi(i);
    const auto n = static_cast<std::size_t>((hi - lo) * plan_.cols);
    next_ = mem::tracked_vector<T>(n);
    T* buf = next_.data();
    const int r = world_.rank();
    const std::int64_t a = std::max(lo, rows_.offset(r));
    const std::int64_t b = std::min(hi, rows_.offset(r) + rows_.size(r));
    if (b > a)
      std::copy_n(w_.row(static_cast<std::size_t>(a - rows_.offset(r))),
                  static_cast<std::size_t>((b - a) * plan_.cols), buf + (a - lo) * plan_.cols);
    world_.start_all_gather<T>(std::span<T>(buf, n),
                               world_.window_counts(rows_, lo, hi, plan_.cols));
  }

  comm& world_;
  const matrix<T>& w_;
  const partition& rows_;
  bucket_plan plan_;
  bool overlap_;
  mem::tracked_vector<T> current_, next_;
};

// C = A·op(B) + beta·C. With several buckets (`pieces`), in up to 16 pieces of at least 64 rows
// or columns, cut along C's longer side so that the smaller operand is the one read again for
// every piece (a batch of 32 rows against 2048 W rows is cut by W rows: cutting its 32 rows would
// stream the whole bucket from memory once per piece); between pieces MPI progresses the pending
// gather (Open MPI advances non-blocking collectives only inside MPI calls). overlap=0 cuts the
// same pieces, so that the two settings run the same products and differ by the overlap alone
// (bench/sharded.cpp times one against the other). With one bucket (the default, bucket ≥ W:
// nothing to overlap), in one call: pieces cost OpenBLAS about a tenth of its rate at 2048³.
// Either way the cut follows the bucket plan alone, never the gather's progress: cutting by when
// it finished would sum differently from run to run (OpenBLAS's blocking follows the piece),
// which the determinism property caught.
template <class T>
void gemm_pieces(comm& world, bool pieces, bool trans_b, std::size_t m, std::size_t n,
                 std::size_t k, const T* a, std::size_t lda, const T* b, std::size_t ldb, T beta,
                 T* c, std::size_t ldc) {
  const bool by_rows = m >= n;
  const std::size_t length = by_rows ? m : n;
  const std::size_t chunk =
      pieces ? std::max<std::size_t>(64, (length + 15) / 16) : std::max<std::size_t>(length, 1);
  for (std::size_t i0 = 0; i0 < length; i0 += chunk) {
    const std::size_t len = std::min(chunk, length - i0);
    if (by_rows)
      ref::gemm<T>(false, trans_b, len, n, k, T(1), a + i0 * lda, lda, b, ldb, beta, c + i0 * ldc,
                   ldc);
    else  // columns i0… of op(B): rows of B when transposed
      ref::gemm<T>(false, trans_b, m, len, k, T(1), a, lda, b + (trans_b ? i0 * ldb : i0), ldb,
                   beta, c + i0, ldc);
    world.test_pending();
  }
}

}  // namespace

namespace {
// A 16-bit block widened to f32 (owned by `keep`), or the block itself for f32 / f64.
template <class T>
const wide_t<T>* wide_view(const T* p, std::size_t n, mem::tracked_vector<float>& keep) {
  if constexpr (is_16bit_v<T>) {
    keep = mixed::widen(p, n);
    return keep.data();
  } else {
    (void)n, (void)keep;
    return p;
  }
}
}  // namespace

void sharded_weights::forward(context& ctx, const run_case& c, const forward_io& io) const {
  io.visit_mixed([&]<class T>(const matrix<T>& x, weights<T> ws, matrix<T>& y) {
    using A = wide_t<T>;  // the products' dtype: f32 for bf16 / f16 (buckets gathered in T)
    const matrix<T>& w = ws[0];
    comm& world = ctx.grid.axis(0);
    const bucket_plan plan = plan_buckets(c);
    const auto m = x.rows, n = static_cast<std::size_t>(c.prob.N),
               k = static_cast<std::size_t>(c.prob.K), cols = static_cast<std::size_t>(plan.cols);
    const bool out_in = c.prob.layout == weight_layout::out_in;
    y = matrix<T>(m, n);
    mixed::partial<T> acc(y);  // Y summed in A, rounded once at the end
    mem::tracked_vector<float> x_keep;
    const A* xa = wide_view<T>(x.data.data(), x.data.size(), x_keep);
    const bool overlap = c.param("overlap") != 0;
    bucket_stream<T> stream(world, w, c.part(weight_row_key(c)), plan, overlap);
    const bool pieces = plan.count > 1;
    for (std::int64_t i = 0; i < plan.count; ++i) {
      const T* wb = stream.acquire(i);
      const auto lo = static_cast<std::size_t>(plan.lo(i));
      const auto rows = static_cast<std::size_t>(plan.hi(i) - plan.lo(i));
      if (m > 0) {
        mem::tracked_vector<float> w_keep;
        const A* wa = wide_view<T>(wb, rows * cols, w_keep);
        if (out_in)  // Y[:, lo:hi] = X · W_bᵀ
          gemm_pieces<A>(world, pieces, true, m, rows, k, xa, k, wa, cols, A(0), acc.data() + lo,
                         n);
        else  // Y += X[:, lo:hi] · W_b
          gemm_pieces<A>(world, pieces, false, m, n, rows, xa + lo, k, wa, cols,
                         i == 0 ? A(0) : A(1), acc.data(), n);
      }
      stream.release();
    }
    acc.round();
  });
}

void sharded_weights::backward(context& ctx, const run_case& c, const backward_io& io) const {
  io.visit_mixed([&]<class T>(const matrix<T>& x, weights<T> ws, const matrix<T>& dy, matrix<T>& dx,
                              gradients<T> dws) {
    using A = wide_t<T>;
    const matrix<T>& w = ws[0];
    matrix<T>& dw = dws[0];
    comm& world = ctx.grid.axis(0);
    const bucket_plan plan = plan_buckets(c);
    const partition& wrows = c.part(weight_row_key(c));
    const auto m = x.rows, n = static_cast<std::size_t>(c.prob.N),
               k = static_cast<std::size_t>(c.prob.K), cols = static_cast<std::size_t>(plan.cols);
    const bool out_in = c.prob.layout == weight_layout::out_in;
    const int r = world.rank();
    dx = matrix<T>(m, k);
    dw = matrix<T>(w.rows, w.cols);
    mixed::partial<T> dx_acc(dx);  // dX summed in A, rounded once at the end
    // reduce=f32 in 16 bits: every bucket's reduce-scatter sums into this rank's dW shard in f32,
    // rounded once at the end.
    const bool sums_in_f32 = is_16bit_v<T> && !mixed::reduce_in_storage(c);
    std::optional<mixed::partial<T>> dw_sums;
    if (sums_in_f32) dw_sums.emplace(dw);
    mem::tracked_vector<float> x_keep, dy_keep;
    const A* xa = wide_view<T>(x.data.data(), x.data.size(), x_keep);
    const A* dya = wide_view<T>(dy.data.data(), dy.data.size(), dy_keep);
    const bool overlap = c.param("overlap") != 0;
    bucket_stream<T> stream(world, w, wrows, plan, overlap);
    const bool pieces = plan.count > 1;
    for (std::int64_t i = 0; i < plan.count; ++i) {
      const T* wb = stream.acquire(i);
      const std::int64_t lo = plan.lo(i), hi = plan.hi(i);
      const auto l = static_cast<std::size_t>(lo), rows = static_cast<std::size_t>(hi - lo);
      if (m > 0) {
        mem::tracked_vector<float> w_keep;
        const A* wa = wide_view<T>(wb, rows * cols, w_keep);
        if (out_in)  // dX += dY[:, lo:hi] · W_b
          gemm_pieces<A>(world, pieces, false, m, k, rows, dya + l, n, wa, cols,
                         i == 0 ? A(0) : A(1), dx_acc.data(), k);
        else  // dX[:, lo:hi] = dY · W_bᵀ
          gemm_pieces<A>(world, pieces, true, m, rows, n, dya, n, wa, cols, A(0), dx_acc.data() + l,
                         k);
      }
      stream.release();
      // This bucket's dW partial sums over the local rows, reduce-scattered to the rows' owners
      // (a 16-bit case's in f32, reduced as its policy says).
      mem::tracked_vector<A> partial(rows * cols);
      if (m > 0 && partial.size() > 0) {
        if (out_in)  // dW_b = dY[:, lo:hi]ᵀ · X
          ref::gemm<A>(true, false, rows, k, m, A(1), dya + l, n, xa, k, A(0), partial.data(),
                       cols);
        else  // dW_b = X[:, lo:hi]ᵀ · dY
          ref::gemm<A>(true, false, rows, n, m, A(1), xa + l, k, dya, n, A(0), partial.data(),
                       cols);
      }
      const std::int64_t a = std::max(lo, wrows.offset(r));
      const std::int64_t b = std::min(hi, wrows.offset(r) + wrows.size(r));
      const std::size_t at =
          b > a ? static_cast<std::size_t>((a - wrows.offset(r)) * plan.cols) : 0;
      const auto mine = static_cast<std::size_t>(std::max<std::int64_t>(b - a, 0) * plan.cols);
      const std::span<const A> in(partial.data(), partial.size());
      if (sums_in_f32)
        world.reduce_scatter_sum<A>(in, std::span<A>(dw_sums->data() + at, mine),
                                    world.window_counts(wrows, lo, hi, plan.cols));
      else
        mixed::reduce_scatter<T>(world, c, in, std::span<T>(dw.data.data() + at, mine),
                                 world.window_counts(wrows, lo, hi, plan.cols));
    }
    dx_acc.round();
    if (sums_in_f32) dw_sums->round();
  });
}

}  // namespace shardcheck::par
