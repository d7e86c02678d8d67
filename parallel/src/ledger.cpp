#include "shardcheck/parallel/ledger.hpp"

#include <numeric>
#include <sstream>

namespace shardcheck::par {

std::string_view to_string(collective c) {
  switch (c) {
    case collective::all_gather: return "all_gather";
    case collective::all_reduce: return "all_reduce";
    case collective::reduce_scatter: return "reduce_scatter";
    case collective::broadcast: return "broadcast";
    case collective::all_to_all: return "all_to_all";
    case collective::barrier: return "barrier";
  }
  return "?";
}

std::string_view to_string(phase p) { return p == phase::forward ? "forward" : "backward"; }

std::string to_string(const ledger_entry& e) {
  std::ostringstream os;
  os << to_string(e.when) << ' ' << to_string(e.kind) << " axis=" << e.axis
     << " elements=" << e.elements << " elem_bytes=" << e.elem_bytes << " sent=" << e.bytes_sent
     << " received=" << e.bytes_received;
  if (e.root >= 0) os << " root=" << e.root;
  return os.str();
}

namespace {
std::int64_t total(std::span<const std::int64_t> counts) {
  return std::accumulate(counts.begin(), counts.end(), std::int64_t{0});
}
ledger_entry make(collective kind, std::size_t elem_bytes, std::int64_t elements,
                  std::int64_t sent, std::int64_t received, int p) {
  ledger_entry e;
  e.kind = kind;
  e.elem_bytes = elem_bytes;
  e.elements = elements;
  const auto b = static_cast<std::int64_t>(elem_bytes);
  e.bytes_sent = p > 1 ? sent * b : 0;
  e.bytes_received = p > 1 ? received * b : 0;
  return e;
}
}  // namespace

ledger_entry all_gather_entry(std::span<const std::int64_t> counts, int me,
                              std::size_t elem_bytes) {
  const auto own = counts[static_cast<std::size_t>(me)];
  return make(collective::all_gather, elem_bytes, total(counts), own, total(counts) - own,
              static_cast<int>(counts.size()));
}

ledger_entry all_reduce_entry(std::int64_t n, int p, std::size_t elem_bytes) {
  return make(collective::all_reduce, elem_bytes, n, n, n, p);
}

ledger_entry reduce_scatter_entry(std::span<const std::int64_t> counts, int me,
                                  std::size_t elem_bytes) {
  const auto own = counts[static_cast<std::size_t>(me)];
  return make(collective::reduce_scatter, elem_bytes, own, total(counts) - own, own,
              static_cast<int>(counts.size()));
}

ledger_entry broadcast_entry(std::int64_t n, int root, int me, int p, std::size_t elem_bytes) {
  auto e = make(collective::broadcast, elem_bytes, n, me == root ? n : 0, me == root ? 0 : n, p);
  e.root = root;
  return e;
}

ledger_entry all_to_all_entry(std::span<const std::int64_t> send_counts,
                              std::span<const std::int64_t> recv_counts, int me,
                              std::size_t elem_bytes) {
  const auto m = static_cast<std::size_t>(me);
  return make(collective::all_to_all, elem_bytes, total(recv_counts),
              total(send_counts) - send_counts[m], total(recv_counts) - recv_counts[m],
              static_cast<int>(send_counts.size()));
}

void ledger::record(ledger_entry e, int axis) {
  e.when = phase_;
  e.axis = axis;
  entries_.push_back(e);
}

}  // namespace shardcheck::par
