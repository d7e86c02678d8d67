#include "fake_collectives.hpp"

#include <numeric>

namespace shardcheck::prop::testing {

namespace {
std::int64_t displacement(std::span<const std::int64_t> counts, int k) {
  return std::accumulate(counts.begin(), counts.begin() + k, std::int64_t{0});
}

// Typed access to a call's buffers (the tests use f64 only).
double* out_of(const par::call& c) { return static_cast<double*>(c.out); }
const double* in_of(const par::call& c) { return static_cast<const double*>(c.in); }
}  // namespace

par::traffic fake_collectives::perform(const par::call& c) {
  using par::collective;
  double* out = out_of(c);
  switch (c.kind) {
    case collective::all_gather:
      for (int q = 0; q < p_; ++q) {
        if (q == me_) continue;
        const std::int64_t at = displacement(c.counts, q);
        for (std::int64_t i = 0; i < c.counts[static_cast<std::size_t>(q)]; ++i)
          out[at + i] = values(q, i);
      }
      break;
    case collective::all_reduce:
      for (std::int64_t i = 0; i < c.count; ++i)
        for (int q = 0; q < p_; ++q)
          if (q != me_) out[i] += values(q, i);
      break;
    case collective::reduce_scatter: {
      const std::int64_t at = displacement(c.counts, me_);
      for (std::int64_t j = 0; j < c.count; ++j) {
        out[j] = in_of(c)[at + j];
        for (int q = 0; q < p_; ++q)
          if (q != me_) out[j] += values(q, at + j);
      }
      break;
    }
    case collective::broadcast:
      if (c.root != me_)
        for (std::int64_t i = 0; i < c.count; ++i) out[i] = values(c.root, i);
      break;
    case collective::all_to_all:
      for (int q = 0; q < p_; ++q) {
        const std::int64_t at = displacement(c.recv_counts, q);
        const std::int64_t from = displacement(c.counts, me_);
        for (std::int64_t i = 0; i < c.recv_counts[static_cast<std::size_t>(q)]; ++i)
          out[at + i] = q == me_ ? in_of(c)[from + i] : values(q, i);
      }
      break;
    case collective::reduce:  // validate() refuses it: raw MPI calls only
    case collective::barrier:
    case collective::send:
    case collective::recv: break;
    default: break;  // one-sided: raw MPI calls only
  }
  return traffic_of(c);
}

par::traffic fake_collectives::run(const par::call& c) {
  calls.push_back({c.kind, c.count, c.root, false});
  return perform(c);
}

void fake_collectives::start(const par::call& c) {
  calls.push_back({c.kind, c.count, c.root, true});
  pending_ = true;
  started_ = c;
}

par::traffic fake_collectives::wait() {
  if (!pending_) return {};
  pending_ = false;
  return perform(started_);
}

MPI_Request fake_collectives::send(const par::message& m) {
  const auto* d = static_cast<const double*>(m.data);
  sends.push_back({m.peer, m.tag, std::vector<double>(d, d + m.count)});
  return MPI_REQUEST_NULL;
}

std::int64_t fake_collectives::recv(const par::message& m) {
  auto* d = static_cast<double*>(m.data);
  for (std::int64_t i = 0; i < m.count; ++i) d[i] = values(m.peer, i);
  return m.count;
}

}  // namespace shardcheck::prop::testing
