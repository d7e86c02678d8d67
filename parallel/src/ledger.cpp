#include "shardcheck/parallel/ledger.hpp"

#include "shardcheck/parallel/memory.hpp"
#include "shardcheck/reference/types.hpp"

#include <algorithm>
#include <numeric>
#include <sstream>

namespace shardcheck::par {

std::string_view to_string(collective c) {
  switch (c) {
    case collective::all_gather: return "all_gather";
    case collective::all_reduce: return "all_reduce";
    case collective::reduce_scatter: return "reduce_scatter";
    case collective::broadcast: return "broadcast";
    case collective::reduce: return "reduce";
    case collective::all_to_all: return "all_to_all";
    case collective::barrier: return "barrier";
    case collective::send: return "send";
    case collective::recv: return "recv";
    case collective::win_create: return "win_create";
    case collective::win_free: return "win_free";
    case collective::put: return "put";
    case collective::get: return "get";
    case collective::accumulate: return "accumulate";
    case collective::get_accumulate: return "get_accumulate";
    case collective::fetch_and_op: return "fetch_and_op";
    case collective::compare_and_swap: return "compare_and_swap";
    case collective::win_fence: return "win_fence";
    case collective::win_lock: return "win_lock";
    case collective::win_unlock: return "win_unlock";
    case collective::win_lock_all: return "win_lock_all";
    case collective::win_unlock_all: return "win_unlock_all";
    case collective::win_flush: return "win_flush";
    case collective::win_flush_all: return "win_flush_all";
    case collective::win_flush_local: return "win_flush_local";
    case collective::win_flush_local_all: return "win_flush_local_all";
    case collective::win_post: return "win_post";
    case collective::win_start: return "win_start";
    case collective::win_complete: return "win_complete";
    case collective::win_wait: return "win_wait";
  }
  return "?";
}

bool one_sided(collective c) { return c >= collective::win_create; }

bool names_peer(collective c) {
  return c == collective::send || c == collective::recv || one_sided(c);
}

std::string_view root_name(collective c) {
  if (c == collective::send || c == collective::recv) return "peer";
  return one_sided(c) ? "target" : "root";
}

std::string_view to_string(phase p) { return p == phase::forward ? "forward" : "backward"; }

std::string to_string(const ledger_entry& e) {
  std::ostringstream os;
  os << to_string(e.when) << ' ' << to_string(e.kind) << " axis=" << e.axis
     << " elements=" << e.elements << " elem_bytes=" << e.elem_bytes << " sent=" << e.bytes_sent
     << " received=" << e.bytes_received;
  if (e.root >= 0) os << ' ' << root_name(e.kind) << '=' << e.root;
  return os.str();
}

namespace {
std::int64_t total(std::span<const std::int64_t> counts) {
  return std::accumulate(counts.begin(), counts.end(), std::int64_t{0});
}
ledger_entry make(collective kind, std::size_t elem_bytes, std::int64_t elements, std::int64_t sent,
                  std::int64_t received, int p) {
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

std::string_view to_string(backend b) { return b == backend::mpi ? "mpi" : "native"; }

std::string_view to_string(algorithm a) {
  switch (a) {
    case algorithm::builtin: return "builtin";
    case algorithm::ring: return "ring";
    case algorithm::recursive_doubling: return "recursive_doubling";
    case algorithm::binomial_tree: return "binomial_tree";
    case algorithm::chain: return "chain";
    case algorithm::pairwise: return "pairwise";
    case algorithm::tree: return "tree";
  }
  return "?";
}

backend parse_backend(std::string_view s) {
  if (s == "mpi") return backend::mpi;
  if (s == "native") return backend::native;
  throw invalid_problem("backend '" + std::string(s) + "' (expected mpi or native)");
}

void algorithm_choice::set(collective kind, algorithm a) {
  const bool ok =
      (kind == collective::all_reduce && (a == algorithm::ring || a == algorithm::tree)) ||
      (kind == collective::broadcast && (a == algorithm::binomial_tree || a == algorithm::chain));
  if (!ok)
    throw invalid_problem("algorithm " + std::string(par::to_string(a)) + " for " +
                          std::string(par::to_string(kind)) +
                          " (the native backend chooses all_reduce=ring|tree, "
                          "broadcast=binomial_tree|chain)");
  chosen_[static_cast<std::size_t>(kind)] = a;
}

algorithm algorithm_choice::of(collective kind) const {
  return chosen_[static_cast<std::size_t>(kind)];
}

bool algorithm_choice::empty() const {
  return std::all_of(chosen_.begin(), chosen_.end(),
                     [](algorithm a) { return a == algorithm::builtin; });
}

std::string algorithm_choice::to_string() const {
  std::string out;
  for (std::size_t k = 0; k < chosen_.size(); ++k) {
    if (chosen_[k] == algorithm::builtin) continue;
    if (!out.empty()) out += ',';
    out += par::to_string(static_cast<collective>(k));
    out += '=';
    out += par::to_string(chosen_[k]);
  }
  return out;
}

algorithm_choice algorithm_choice::parse(std::string_view s) {
  algorithm_choice c;
  while (!s.empty()) {
    const std::size_t comma = s.find(',');
    const std::string_view item = s.substr(0, comma);
    s = comma == std::string_view::npos ? std::string_view{} : s.substr(comma + 1);
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos)
      throw invalid_problem("algorithm choice '" + std::string(item) +
                            "' (expected collective=algorithm, e.g. all_reduce=tree)");
    const std::string_view kind = item.substr(0, eq), name = item.substr(eq + 1);
    std::size_t k = 0;
    while (k < c.chosen_.size() && par::to_string(static_cast<collective>(k)) != kind) ++k;
    if (k == c.chosen_.size())
      throw invalid_problem("algorithm choice '" + std::string(item) + "': no collective '" +
                            std::string(kind) + "'");
    int a = 0;
    const int algorithms = static_cast<int>(algorithm::tree) + 1;
    while (a < algorithms && par::to_string(static_cast<algorithm>(a)) != name) ++a;
    if (a == algorithms)
      throw invalid_problem("algorithm choice '" + std::string(item) + "': no algorithm '" +
                            std::string(name) + "'");
    c.set(static_cast<collective>(k), static_cast<algorithm>(a));
  }
  return c;
}

backend_spec parse_backend_spec(std::string_view s) {
  const std::size_t colon = s.find(':');
  backend_spec b(parse_backend(s.substr(0, colon)));
  if (colon == std::string_view::npos) return b;
  if (b.kind != backend::native)
    throw invalid_problem("backend '" + std::string(s) + "': only native takes algorithm choices");
  b.algorithms = algorithm_choice::parse(s.substr(colon + 1));
  if (b.algorithms.empty())
    throw invalid_problem("backend '" + std::string(s) + "': no algorithm after ':'");
  return b;
}

std::string to_string(const backend_spec& b) {
  std::string out(to_string(b.kind));
  if (b.algorithms.empty()) return out;
  out += ':';
  out += b.algorithms.to_string();
  return out;
}

namespace {
// Native thresholds, in elements of the whole buffer.
constexpr std::int64_t max_recursive_doubling = 1024;
constexpr std::int64_t min_chain = 16384;

std::int64_t ceil_log2(int p) {
  std::int64_t l = 0;
  while ((std::int64_t{1} << l) < p) ++l;
  return l;
}
int mod(int a, int p) { return ((a % p) + p) % p; }
}  // namespace

algorithm algorithm_of(const backend_spec& b, collective kind, int p, std::int64_t count) {
  if (b.kind == backend::mpi) return algorithm::builtin;
  if (const algorithm chosen = b.algorithms.of(kind); chosen != algorithm::builtin) return chosen;
  switch (kind) {
    case collective::all_reduce:
      return count <= max_recursive_doubling || p == 1 ? algorithm::recursive_doubling
                                                       : algorithm::ring;
    case collective::broadcast:
      // p = 2: one link, which a single message uses best.
      return count > min_chain && p > 2 ? algorithm::chain : algorithm::binomial_tree;
    case collective::all_to_all: return algorithm::pairwise;
    default: return algorithm::ring;
  }
}

std::int64_t reduction_depth(const backend_spec& b, collective kind, int p, std::int64_t count) {
  const algorithm a = algorithm_of(b, kind, p, count);
  return a == algorithm::recursive_doubling || a == algorithm::tree ? ceil_log2(p) : p - 1;
}

int binomial_children(int me, int root, int p) {
  const int vr = mod(me - root, p);
  int mask = 1;
  while (mask < p && (vr & mask) == 0) mask <<= 1;
  int children = 0;
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (vr + mask < p) ++children;
  return children;
}

std::pair<std::int64_t, std::int64_t> balanced_chunk(std::int64_t n, int p, int k) {
  const std::int64_t base = n / p, extra = n % p;
  return {k * base + std::min<std::int64_t>(k, extra), base + (k < extra ? 1 : 0)};
}

ledger_entry all_gather_entry(backend b, std::span<const std::int64_t> counts, int me,
                              std::size_t elem_bytes) {
  const int p = static_cast<int>(counts.size());
  const auto c = [&](int k) { return counts[static_cast<std::size_t>(mod(k, p))]; };
  const std::int64_t sent = b == backend::mpi ? c(me) : total(counts) - c(me + 1);
  return make(collective::all_gather, elem_bytes, total(counts), sent, total(counts) - c(me), p);
}

ledger_entry all_reduce_entry(const backend_spec& b, std::int64_t n, int me, int p,
                              std::size_t elem_bytes) {
  std::int64_t sent = n, received = n;
  const algorithm a = algorithm_of(b, collective::all_reduce, p, n);
  if (a == algorithm::ring) {
    const auto c = [&](int k) { return balanced_chunk(n, p, mod(k, p)).second; };
    sent = 2 * n - c(me) - c(me + 1);
    received = 2 * n - c(me - 1) - c(me);
  } else if (a == algorithm::recursive_doubling) {
    int q = 1;
    while (2 * q <= p) q *= 2;
    const std::int64_t steps = ceil_log2(q);
    sent = received = me < p - q ? (steps + 1) * n : me >= q ? n : steps * n;
  } else if (a == algorithm::tree) {
    sent = received = (binomial_children(me, 0, p) + (me != 0 ? 1 : 0)) * n;
  }
  return make(collective::all_reduce, elem_bytes, n, sent, received, p);
}

ledger_entry reduce_scatter_entry(backend b, std::span<const std::int64_t> counts, int me,
                                  std::size_t elem_bytes) {
  const int p = static_cast<int>(counts.size());
  const auto c = [&](int k) { return counts[static_cast<std::size_t>(mod(k, p))]; };
  const std::int64_t received = b == backend::mpi ? c(me) : total(counts) - c(me - 1);
  return make(collective::reduce_scatter, elem_bytes, c(me), total(counts) - c(me), received, p);
}

ledger_entry broadcast_entry(const backend_spec& b, std::int64_t n, int root, int me, int p,
                             std::size_t elem_bytes) {
  std::int64_t sent = me == root ? n : 0;
  const algorithm a = algorithm_of(b, collective::broadcast, p, n);
  if (a == algorithm::binomial_tree) sent = n * binomial_children(me, root, p);
  if (a == algorithm::chain) sent = mod(me - root, p) == p - 1 ? 0 : n;
  auto e = make(collective::broadcast, elem_bytes, n, sent, me == root ? 0 : n, p);
  e.root = root;
  return e;
}

ledger_entry reduce_entry(std::int64_t n, int root, int me, int p, std::size_t elem_bytes) {
  auto e = make(collective::reduce, elem_bytes, n, me == root ? 0 : n,
                me == root ? checked_mul(n, p - 1, "reduce elements") : 0, p);
  e.root = root;
  return e;
}

ledger_entry all_to_all_entry(backend, std::span<const std::int64_t> send_counts,
                              std::span<const std::int64_t> recv_counts, int me,
                              std::size_t elem_bytes) {
  const auto m = static_cast<std::size_t>(me);
  return make(collective::all_to_all, elem_bytes, total(recv_counts),
              total(send_counts) - send_counts[m], total(recv_counts) - recv_counts[m],
              static_cast<int>(send_counts.size()));
}

ledger_entry send_entry(std::int64_t n, int peer, std::size_t elem_bytes) {
  auto e = make(collective::send, elem_bytes, n, n, 0, 2);
  e.root = peer;
  return e;
}

ledger_entry recv_entry(std::int64_t n, int peer, std::size_t elem_bytes) {
  auto e = make(collective::recv, elem_bytes, n, 0, n, 2);
  e.root = peer;
  return e;
}

namespace {
ledger_entry one_sided_entry(collective kind, std::int64_t n, std::size_t elem_bytes,
                             std::int64_t sent, std::int64_t received, int target) {
  ledger_entry e;
  e.kind = kind;
  e.elements = n;
  e.elem_bytes = elem_bytes;
  e.bytes_sent = sent;
  e.bytes_received = received;
  e.root = target;
  return e;
}
std::int64_t bytes(std::int64_t n, std::size_t elem_bytes) {
  return checked_mul(n, static_cast<std::int64_t>(elem_bytes), "one-sided bytes");
}
}  // namespace

ledger_entry win_create_entry(std::int64_t window_bytes) {
  return one_sided_entry(collective::win_create, window_bytes, 1, 0, 0, -1);
}

ledger_entry put_entry(std::int64_t n, int target, std::size_t elem_bytes) {
  return one_sided_entry(collective::put, n, elem_bytes, bytes(n, elem_bytes), 0, target);
}

ledger_entry get_entry(std::int64_t n, int target, std::size_t elem_bytes) {
  return one_sided_entry(collective::get, n, elem_bytes, 0, bytes(n, elem_bytes), target);
}

ledger_entry accumulate_entry(std::int64_t n, int target, std::size_t elem_bytes) {
  return one_sided_entry(collective::accumulate, n, elem_bytes, bytes(n, elem_bytes), 0, target);
}

ledger_entry get_accumulate_entry(std::int64_t n, int target, std::size_t elem_bytes,
                                  std::int64_t result_bytes) {
  return one_sided_entry(collective::get_accumulate, n, elem_bytes, bytes(n, elem_bytes),
                         result_bytes, target);
}

ledger_entry fetch_and_op_entry(int target, std::size_t elem_bytes) {
  const auto b = static_cast<std::int64_t>(elem_bytes);
  return one_sided_entry(collective::fetch_and_op, 1, elem_bytes, b, b, target);
}

ledger_entry compare_and_swap_entry(int target, std::size_t elem_bytes) {
  const auto b = static_cast<std::int64_t>(elem_bytes);
  return one_sided_entry(collective::compare_and_swap, 1, elem_bytes, 2 * b, b, target);
}

ledger_entry win_sync_entry(collective kind, int target, std::int64_t elements) {
  return one_sided_entry(kind, elements, 0, 0, 0, target);
}

ledger::ledger() {
  const mem::mpi_heap shardcheck_own;
  entries_.reserve(256);
}

void ledger::reserve(std::size_t n) {
  const mem::mpi_heap shardcheck_own;
  entries_.reserve(n);
}

void ledger::record(ledger_entry e, int axis) {
  e.when = phase_;
  e.axis = axis;
  const mem::mpi_heap shardcheck_own;
  entries_.push_back(e);
}

}  // namespace shardcheck::par
