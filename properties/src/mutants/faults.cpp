#include "mutants/faults.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>
#include <utility>

namespace shardcheck::prop::mutants {

namespace {
using par::call;
using par::collective;
using par::traffic;

std::size_t as_size(std::int64_t n) { return static_cast<std::size_t>(n); }

std::int64_t displacement(std::span<const std::int64_t> counts, int k) {
  return std::accumulate(counts.begin(), counts.begin() + k, std::int64_t{0});
}

std::int64_t total(std::span<const std::int64_t> counts) {
  return std::accumulate(counts.begin(), counts.end(), std::int64_t{0});
}

int non_empty(std::span<const std::int64_t> counts) {
  return static_cast<int>(
      std::count_if(counts.begin(), counts.end(), [](std::int64_t n) { return n > 0; }));
}

void copy_elements(void* to, const void* from, std::int64_t n, std::size_t elem) {
  if (n > 0) std::memcpy(to, from, as_size(n) * elem);
}

std::byte* at(void* base, std::int64_t elements, std::size_t elem) {
  return static_cast<std::byte*>(base) + as_size(elements) * elem;
}
const std::byte* at(const void* base, std::int64_t elements, std::size_t elem) {
  return static_cast<const std::byte*>(base) + as_size(elements) * elem;
}

// Parts given by `counts` rewritten in reverse order (the last part first), through `copy`.
void reverse_parts(void* buffer, std::span<const std::int64_t> counts, std::size_t elem,
                   untracked_vector<std::byte>& copy) {
  const std::int64_t n = total(counts);
  copy.resize(std::max<std::size_t>(as_size(n) * elem, 1));
  copy_elements(copy.data(), buffer, n, elem);
  std::int64_t to = 0;
  for (auto q = static_cast<int>(counts.size()); q-- > 0;) {
    const std::int64_t c = counts[static_cast<std::size_t>(q)];
    copy_elements(at(buffer, to, elem), at(copy.data(), displacement(counts, q), elem), c, elem);
    to += c;
  }
}

// Σ over order[lo, hi) of parts[order[i]·n + e], as a pairwise tree: (first half) + (second).
template <class T>
T tree_sum(const T* parts, std::size_t n, std::size_t e, std::span<const int> order, std::size_t lo,
           std::size_t hi) {
  if (hi - lo == 1) return parts[static_cast<std::size_t>(order[lo]) * n + e];
  const std::size_t mid = lo + (hi - lo + 1) / 2;
  return tree_sum(parts, n, e, order, lo, mid) + tree_sum(parts, n, e, order, mid, hi);
}

template <class T>
void sum_parts(const void* parts, void* out, std::size_t n, std::span<const int> order) {
  const auto* in = static_cast<const T*>(parts);
  auto* y = static_cast<T*>(out);
  for (std::size_t e = 0; e < n; ++e) y[e] = tree_sum(in, n, e, order, 0, order.size());
}
}  // namespace

traffic fault_layer::shadow(const call& c) {
  call s = c;
  const std::size_t bytes = as_size(c.count) * c.elem_bytes();
  shadow_.resize(std::max<std::size_t>(bytes, 1));
  if (c.in == nullptr && c.out != nullptr && bytes > 0) std::memcpy(shadow_.data(), c.out, bytes);
  s.out = shadow_.data();
  return inner_->run(s);
}

// --- all-gather -----------------------------------------------------------------------------

namespace {
// Zeroes the n elements at element `off` of c's result: a part that never arrived. Zeros, not what
// the buffer held, so that the result is the same whatever the kernel left there (a kernel may
// hand a collective an uninitialised buffer it fills whole).
void zero_part(const call& c, std::int64_t off, std::int64_t n) {
  if (n > 0) std::memset(at(c.out, off, c.elem_bytes()), 0, as_size(n) * c.elem_bytes());
}

// Runs c through `inner`, then zeroes part k.
traffic without_part(par::collectives& inner, const call& c, int k) {
  const traffic t = inner.run(c);
  zero_part(c, displacement(c.counts, k), c.counts[static_cast<std::size_t>(k)]);
  return t;
}
}  // namespace

traffic ag_drop_last::run(const call& c) {
  const int p = size();
  if (c.kind != collective::all_gather || p < 2 || rank() == p - 1 ||
      c.counts[static_cast<std::size_t>(p - 1)] == 0)
    return inner().run(c);
  fired();
  return without_part(inner(), c, p - 1);
}

traffic ag_ring_short::run(const call& c) {
  const int p = size();
  if (c.kind != collective::all_gather || p < 2) return inner().run(c);
  const int next = (rank() + 1) % p;
  if (c.counts[static_cast<std::size_t>(next)] == 0) return inner().run(c);
  fired();
  return without_part(inner(), c, next);
}

traffic ag_reversed::run(const call& c) {
  const traffic t = inner().run(c);
  if (c.kind != collective::all_gather || non_empty(c.counts) < 2) return t;
  fired();
  reverse_parts(c.out, c.counts, c.elem_bytes(), copy_);
  return t;
}

// --- all-reduce -----------------------------------------------------------------------------

traffic ar_skipped::run(const call& c) {
  if (c.kind != collective::all_reduce || size() < 2 || c.count == 0) return inner().run(c);
  fired();
  return shadow(c);
}

traffic ar_scatter_only::run(const call& c) {
  if (c.kind != collective::all_reduce || size() < 2 || c.count == 0) return inner().run(c);
  const std::size_t es = c.elem_bytes();
  reduced_.resize(as_size(c.count) * es);
  std::memcpy(reduced_.data(), c.out, reduced_.size());
  call s = c;
  s.out = reduced_.data();
  const traffic t = inner().run(s);
  const auto [off, n] = par::balanced_chunk(c.count, size(), rank());
  if (n < c.count) fired();
  copy_elements(at(c.out, off, es), reduced_.data() + as_size(off) * es, n, es);
  return t;
}

traffic ar_local_sum::run(const call& c) {
  const int p = size();
  if (c.kind != collective::all_reduce || p < 3 || c.count == 0) return inner().run(c);
  const traffic t = shadow(c);
  const std::size_t es = c.elem_bytes();
  const std::size_t n = as_size(c.count);
  parts_.resize(as_size(p) * n * es);
  std::memcpy(parts_.data() + as_size(rank()) * n * es, c.out, n * es);
  counts_.assign(as_size(p), c.count);
  call g;
  g.kind = collective::all_gather;
  g.type = c.type;
  g.out = parts_.data();
  g.count = c.count * p;
  g.counts = counts_;
  (void)inner().run(g);
  order_.resize(as_size(p));
  if (order_of(calls_++, order_)) fired();
  switch (c.type) {
    case dtype::f32: sum_parts<float>(parts_.data(), c.out, n, order_); break;
    case dtype::bf16: sum_parts<bfloat16_t>(parts_.data(), c.out, n, order_); break;
    case dtype::f16: sum_parts<half_t>(parts_.data(), c.out, n, order_); break;
    case dtype::f64: sum_parts<double>(parts_.data(), c.out, n, order_); break;
  }
  return t;
}

bool ar_order_alternates::order_of(std::uint64_t call, std::span<int> order) {
  const int shift = call == 0 ? 0 : 1;
  const auto p = static_cast<int>(order.size());
  for (int i = 0; i < p; ++i) order[static_cast<std::size_t>(i)] = (i + shift) % p;
  return shift != 0;
}

bool ar_rank_order::order_of(std::uint64_t, std::span<int> order) {
  const auto p = static_cast<int>(order.size());
  for (int i = 0; i < p; ++i) order[static_cast<std::size_t>(i)] = (i + rank()) % p;
  return true;
}

// --- reduce-scatter, broadcast, all-to-all ----------------------------------------------------

traffic rs_even_offsets::run(const call& c) {
  const int p = size();
  if (c.kind != collective::reduce_scatter || p < 2) return inner().run(c);
  const std::int64_t n = total(c.counts), even = n / p;
  bool moved = false;
  for (int k = 0; k < p; ++k) {
    const std::int64_t ck = c.counts[static_cast<std::size_t>(k)];
    if (ck > 0 && std::min(k * even, n - ck) != displacement(c.counts, k)) moved = true;
  }
  if (!moved) return inner().run(c);
  fired();
  const std::size_t es = c.elem_bytes();
  in_.resize(std::max<std::size_t>(as_size(n) * es, 1));
  for (int k = 0; k < p; ++k) {
    const std::int64_t ck = c.counts[static_cast<std::size_t>(k)];
    copy_elements(at(in_.data(), displacement(c.counts, k), es),
                  at(c.in, std::min(k * even, n - ck), es), ck, es);
  }
  call s = c;
  s.in = in_.data();
  return inner().run(s);
}

namespace {
// x rounded to the nearest bfloat16 (its top 16 bits), ties to even; NaN and ±Inf unchanged.
float to_bf16(float x) {
  if (!std::isfinite(x)) return x;
  auto b = std::bit_cast<std::uint32_t>(x);
  b += 0x7fffu + ((b >> 16) & 1u);
  return std::bit_cast<float>(b & 0xffff0000u);
}
}  // namespace

traffic reduce_in_bf16::run(const call& c) {
  const bool reduction = c.kind == collective::all_reduce || c.kind == collective::reduce_scatter;
  if (!reduction || c.type != dtype::f32 || size() < 2) return inner().run(c);
  const bool in_place = c.in == nullptr;
  const std::int64_t n = in_place ? c.count : total(c.counts);
  if (n <= 0) return inner().run(c);
  float* data = static_cast<float*>(c.out);
  call s = c;
  if (!in_place) {
    in_.resize(as_size(n) * sizeof(float));
    std::memcpy(in_.data(), c.in, in_.size());
    data = reinterpret_cast<float*>(in_.data());
    s.in = in_.data();
  }
  bool changed = false;
  for (std::int64_t i = 0; i < n; ++i) {
    const float r = to_bf16(data[i]);
    changed = changed || r != data[i];
    data[i] = r;
  }
  if (changed) fired();
  return inner().run(s);
}

traffic bcast_wrong_root::run(const call& c) {
  if (c.kind != collective::broadcast || size() < 2 || c.count == 0) return inner().run(c);
  fired();
  const traffic t = shadow(c);
  call wrong = c;
  wrong.root = (c.root + 1) % size();
  (void)inner().run(wrong);
  return t;
}

void bcast_wrong_root::start(const call& c) {
  moved_ = c.kind == collective::broadcast && size() >= 2 && c.count > 0;
  if (!moved_) return inner().start(c);
  fired();
  asked_ = shadow(c);
  call wrong = c;
  wrong.root = (c.root + 1) % size();
  inner().start(wrong);
}

traffic bcast_wrong_root::wait() {
  const traffic t = inner().wait();
  if (!std::exchange(moved_, false)) return t;
  return asked_;
}

traffic a2a_reversed::run(const call& c) {
  const traffic t = inner().run(c);
  if (c.kind != collective::all_to_all || non_empty(c.recv_counts) < 2) return t;
  fired();
  reverse_parts(c.out, c.recv_counts, c.elem_bytes(), copy_);
  return t;
}

// --- any collective -------------------------------------------------------------------------

traffic skipping_layer::run(const call& c) {
  if (!skips(c)) return fault_layer::run(c);
  fired();
  instead();
  return {};
}

void skipping_layer::start(const call& c) {
  if (!skips(c)) return fault_layer::start(c);
  fired();
  instead();
  skipped_start_ = true;
}

bool skipping_layer::test() { return skipped_start_ || fault_layer::test(); }

traffic skipping_layer::wait() {
  if (!skipped_start_) return fault_layer::wait();
  skipped_start_ = false;
  return {};
}

bool rank0_skips::skips(const call& c) {
  if (done_ || c.kind == collective::barrier || size() < 2) return false;
  done_ = true;
  return rank() == 0;
}

void rank0_skips::instead() { (void)inner().run(call{}); }

bool last_rank_stops::skips(const call&) {
  return size() >= 2 && rank() == size() - 1 && calls_++ > 0;
}

void extra_barrier::once() {
  if (done_) return;
  done_ = true;
  fired();
  (void)inner().run(call{});
}

traffic extra_barrier::run(const call& c) {
  once();
  return inner().run(c);
}

void extra_barrier::start(const call& c) {
  once();
  inner().start(c);
}

// --- started collectives --------------------------------------------------------------------

void started_early::start(const call& c) {
  const int p = size();
  const std::size_t es = c.elem_bytes();
  call_ = c;
  pending_ = pending::none;
  if (p >= 2 && c.kind == collective::all_gather) {
    const int next = (rank() + 1) % p;
    count_ = c.counts[static_cast<std::size_t>(next)];
    if (count_ > 0) {
      at_ = displacement(c.counts, next);
      pending_ = pending::gather;
    }
  } else if (p >= 2 && c.count > 0 &&
             (c.kind == collective::all_reduce || c.kind == collective::reduce_scatter)) {
    scratch_.resize(as_size(c.count) * es);
    if (c.kind == collective::all_reduce) {
      std::memcpy(scratch_.data(), c.out, scratch_.size());
      pending_ = pending::reduce;
    } else {
      at_ = displacement(c.counts, rank());
      count_ = c.count;
      pending_ = pending::scatter;
    }
    call s = c;
    s.out = scratch_.data();
    fired();
    return inner().start(s);
  }
  if (pending_ != pending::none) fired();
  inner().start(c);
}

traffic started_early::wait() {
  const traffic t = inner().wait();
  const std::size_t es = call_.elem_bytes();
  switch (pending_) {
    case pending::gather: zero_part(call_, at_, count_); break;
    case pending::scatter: copy_elements(call_.out, at(call_.in, at_, es), count_, es); break;
    case pending::reduce:  // the buffer never saw the reduction
    case pending::none: break;
  }
  pending_ = pending::none;
  return t;
}

// --- point-to-point ---------------------------------------------------------------------------

MPI_Request p2p_lagged::send(const par::message& m) {
  const std::size_t bytes = as_size(m.count) * size_of(m.type);
  if (bytes == 0) return inner().send(m);
  buffers_.emplace_back(bytes);
  std::memcpy(buffers_.back().data(), m.data, bytes);
  const std::size_t now = buffers_.size() - 1;
  for (last& l : last_) {
    if (l.peer != m.peer || l.bytes != bytes) continue;
    const bool lags = l.tag < m.tag;
    par::message lagged = m;
    lagged.data = buffers_[l.buffer].data();
    l.buffer = now;
    l.tag = m.tag;
    if (!lags) return inner().send(m);
    fired();
    return inner().send(lagged);
  }
  last_.push_back({m.peer, bytes, m.tag, now});
  return inner().send(m);
}

void unanswered::wait_forever() {
  if (rank() != 0 || size() < 2) return;
  fired();
  double never = 0;
  (void)inner().recv(par::message{dtype::f64, &never, 1, 1, 99});
}

traffic unanswered::run(const call& c) {
  wait_forever();
  return inner().run(c);
}

void unanswered::start(const call& c) {
  wait_forever();
  inner().start(c);
}

}  // namespace shardcheck::prop::mutants
