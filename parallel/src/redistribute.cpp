#include "shardcheck/parallel/redistribute.hpp"

#include <algorithm>

namespace shardcheck::par {

namespace {

using kind = placement::kind;

bool is_s(placement pl, int d) { return pl.what == kind::shard && pl.dim == d; }

const partition& need(const partition* parts, const char* which, std::int64_t length, int p) {
  if (parts == nullptr)
    throw invalid_problem(std::string("redistribute: S needs a partition of the ") + which);
  if (parts->parts() != p || parts->length() != length)
    throw invalid_problem(std::string("redistribute: the partition of the ") + which + " (" +
                          parts->to_string() + ") does not split " + std::to_string(length) +
                          " into " + std::to_string(p) + " parts");
  return *parts;
}

void check_pair(placement from, placement to) {
  if (to.what == kind::partial && from.what != kind::partial)
    throw invalid_problem("redistribute: " + from.to_string() + " → P is not a redistribution");
  for (placement pl : {from, to}) {
    if (pl.what == kind::on)
      throw invalid_problem("redistribute: " + pl.to_string() +
                            " moves a tensor between stages, which is point-to-point");
    if (pl.what == kind::shard && pl.dim != 0 && pl.dim != 1)
      throw invalid_problem("redistribute: " + pl.to_string() + " on a matrix");
  }
}

// send[q] = r_me·c_q and recv[q] = r_q·c_me, for S(0) → S(1) (swapped for S(1) → S(0)).
void all_to_all_counts(const partition& rows, const partition& cols, int me,
                       std::span<std::int64_t> send, std::span<std::int64_t> recv) {
  for (int q = 0; q < rows.parts(); ++q) {
    send[static_cast<std::size_t>(q)] = rows.size(me) * cols.size(q);
    recv[static_cast<std::size_t>(q)] = rows.size(q) * cols.size(me);
  }
}

}  // namespace

std::pair<std::int64_t, std::int64_t> local_extent(const global_shape& g, placement pl, int me) {
  if (is_s(pl, 0)) return {g.row_parts->size(me), g.cols};
  if (is_s(pl, 1)) return {g.rows, g.col_parts->size(me)};
  return {g.rows, g.cols};
}

redistribution_cost redistribution_cost_of(const global_shape& g, placement from, placement to,
                                           int me, int p, dtype type, const backend_spec& b) {
  check_pair(from, to);
  const std::size_t s = size_of(type);
  const auto bytes = static_cast<std::int64_t>(s);
  const std::int64_t m = g.rows, n = g.cols;
  redistribution_cost out;
  const auto [out_rows, out_cols] = [&] {
    if (is_s(to, 0)) return std::pair{need(g.row_parts, "rows", m, p).size(me), n};
    if (is_s(to, 1)) return std::pair{m, need(g.col_parts, "columns", n, p).size(me)};
    return std::pair{m, n};
  }();
  const std::int64_t output = out_rows * out_cols * bytes;
  const auto counts_bytes = 2 * static_cast<std::int64_t>(p * sizeof(std::int64_t));
  out.peak_bytes = output;
  if (from == to || from.what == kind::replicate) return out;  // a copy or a slice
  if (to.what == kind::replicate) {
    if (from.what == kind::partial) {
      out.entries.push_back(all_reduce_entry(b, m * n, me, p, s));
    } else if (is_s(from, 0)) {
      out.entries.push_back(all_gather_entry(b, need(g.row_parts, "rows", m, p).scaled(n), me, s));
    } else {
      out.entries.push_back(
          all_gather_entry(b, need(g.col_parts, "columns", n, p).scaled(m), me, s));
      out.peak_bytes += m * n * bytes;  // the packed buffer
    }
    return out;
  }
  if (from.what == kind::partial) {
    const partition& parts = is_s(to, 0) ? *g.row_parts : *g.col_parts;
    out.entries.push_back(reduce_scatter_entry(b, parts.scaled(is_s(to, 0) ? n : m), me, s));
    if (is_s(to, 1)) out.peak_bytes += m * n * bytes;  // the input packed by column blocks
    return out;
  }
  // S(i) → S(j), i ≠ j.
  const partition& rows = need(g.row_parts, "rows", m, p);
  const partition& cols = need(g.col_parts, "columns", n, p);
  std::vector<std::int64_t> send(static_cast<std::size_t>(p)), recv(send.size());
  if (is_s(from, 0))
    all_to_all_counts(rows, cols, me, send, recv);
  else
    all_to_all_counts(rows, cols, me, recv, send);
  out.entries.push_back(all_to_all_entry(b, send, recv, me, s));
  // S(0)→S(1): packed send of r_me·N; S(1)→S(0): packed receive of r_me·N. Both: the counts.
  out.peak_bytes += rows.size(me) * n * bytes + counts_bytes;
  return out;
}

template <class T>
matrix<T> redistribute(comm& world, const matrix<T>& in, const global_shape& g, placement from,
                       placement to) {
  check_pair(from, to);
  const int me = world.rank(), p = world.size();
  const auto m = static_cast<std::size_t>(g.rows), n = static_cast<std::size_t>(g.cols);
  const auto [in_rows, in_cols] = local_extent(g, from, me);
  if (static_cast<std::int64_t>(in.rows) != in_rows ||
      static_cast<std::int64_t>(in.cols) != in_cols)
    throw invalid_problem("redistribute: a " + std::to_string(in.rows) + "×" +
                          std::to_string(in.cols) + " shard for " + from.to_string() + " of " +
                          std::to_string(m) + "×" + std::to_string(n) + " on rank " +
                          std::to_string(me) + " (expected " + std::to_string(in_rows) + "×" +
                          std::to_string(in_cols) + ")");
  if (is_s(from, 0) || is_s(to, 0)) (void)need(g.row_parts, "rows", g.rows, p);
  if (is_s(from, 1) || is_s(to, 1)) (void)need(g.col_parts, "columns", g.cols, p);

  if (from == to) {
    matrix<T> out(in.rows, in.cols);
    std::copy(in.data.begin(), in.data.end(), out.data.begin());
    return out;
  }
  if (from.what == kind::replicate) {  // a local slice
    const auto [rows, cols] = local_extent(g, to, me);
    matrix<T> out(static_cast<std::size_t>(rows), static_cast<std::size_t>(cols));
    const auto r0 = static_cast<std::size_t>(is_s(to, 0) ? g.row_parts->offset(me) : 0);
    const auto c0 = static_cast<std::size_t>(is_s(to, 1) ? g.col_parts->offset(me) : 0);
    for (std::size_t i = 0; i < out.rows; ++i)
      std::copy_n(in.row(r0 + i) + c0, out.cols, out.row(i));
    return out;
  }
  if (to.what == kind::replicate) {
    matrix<T> out(m, n);
    if (from.what == kind::partial) {
      std::copy(in.data.begin(), in.data.end(), out.data.begin());
      world.all_reduce_sum<T>(out.span());
    } else if (is_s(from, 0)) {
      std::copy(in.data.begin(), in.data.end(),
                out.row(static_cast<std::size_t>(g.row_parts->offset(me))));
      world.all_gather<T>(out.span(), *g.row_parts, static_cast<std::int64_t>(n));
    } else {
      // Rank q's M×c_q block sits at packed[M·offset_q, M·(offset_q + c_q)).
      const partition& cols = *g.col_parts;
      mem::tracked_vector<T> packed(m * n);  // gathered into: zeroed (column_parallel.cpp)
      std::copy(in.data.begin(), in.data.end(),
                packed.begin() +
                    static_cast<std::ptrdiff_t>(m * static_cast<std::size_t>(cols.offset(me))));
      world.all_gather<T>(std::span<T>(packed.data(), packed.size()), cols,
                          static_cast<std::int64_t>(m));
      for (int q = 0; q < p; ++q) {
        const auto cq = static_cast<std::size_t>(cols.size(q)),
                   off = static_cast<std::size_t>(cols.offset(q));
        for (std::size_t i = 0; i < m; ++i)
          std::copy_n(packed.data() + m * off + i * cq, cq, out.row(i) + off);
      }
    }
    return out;
  }
  if (from.what == kind::partial) {
    if (is_s(to, 0)) {
      const partition& rows = *g.row_parts;
      matrix<T> out(static_cast<std::size_t>(rows.size(me)), n);
      world.reduce_scatter_sum<T>(in.span(), out.span(), rows, static_cast<std::int64_t>(n));
      return out;
    }
    const partition& cols = *g.col_parts;
    mem::scratch_vector<T> packed(m * n);
    for (int q = 0; q < p; ++q) {
      const auto cq = static_cast<std::size_t>(cols.size(q)),
                 off = static_cast<std::size_t>(cols.offset(q));
      for (std::size_t i = 0; i < m; ++i)
        std::copy_n(in.row(i) + off, cq, packed.data() + m * off + i * cq);
    }
    matrix<T> out(m, static_cast<std::size_t>(cols.size(me)));
    world.reduce_scatter_sum<T>(std::span<const T>(packed.data(), packed.size()), out.span(), cols,
                                static_cast<std::int64_t>(m));
    return out;
  }
  // S(i) → S(j), i ≠ j.
  const partition& rows = *g.row_parts;
  const partition& cols = *g.col_parts;
  const auto rme = static_cast<std::size_t>(rows.size(me));
  mem::tracked_vector<std::int64_t> send(static_cast<std::size_t>(p)), recv(send.size());
  // Sent from below, received into further down: zeroed (column_parallel.cpp).
  mem::tracked_vector<T> packed(rme * n);
  if (is_s(from, 0)) {
    // Send rows r_me × c_q to q; q's r_q × c_me arrive in row order: the M×c_me output itself.
    all_to_all_counts(rows, cols, me, send, recv);
    std::size_t at = 0;
    for (int q = 0; q < p; ++q) {
      const auto cq = static_cast<std::size_t>(cols.size(q)),
                 off = static_cast<std::size_t>(cols.offset(q));
      for (std::size_t i = 0; i < rme; ++i, at += cq)
        std::copy_n(in.row(i) + off, cq, packed.data() + at);
    }
    matrix<T> out(m, static_cast<std::size_t>(cols.size(me)));
    world.all_to_all<T>(std::span<const T>(packed.data(), packed.size()), send, out.span(), recv);
    return out;
  }
  // The input's row blocks r_q × c_me are contiguous in rank order; q's r_me × c_q arrive packed.
  all_to_all_counts(rows, cols, me, recv, send);
  world.all_to_all<T>(in.span(), send, std::span<T>(packed.data(), packed.size()), recv);
  matrix<T> out(rme, n);
  for (int q = 0; q < p; ++q) {
    const auto cq = static_cast<std::size_t>(cols.size(q)),
               off = static_cast<std::size_t>(cols.offset(q));
    for (std::size_t r = 0; r < rme; ++r)
      std::copy_n(packed.data() + rme * off + r * cq, cq, out.row(r) + off);
  }
  return out;
}

template matrix<float> redistribute<float>(comm&, const matrix<float>&, const global_shape&,
                                           placement, placement);
template matrix<double> redistribute<double>(comm&, const matrix<double>&, const global_shape&,
                                             placement, placement);

}  // namespace shardcheck::par
