#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "collectives/native.hpp"
#include "shardcheck/parallel/comm.hpp"
#include "shardcheck/parallel/flight.hpp"
#include "shardcheck/parallel/memory.hpp"

namespace shardcheck::par {

namespace {
// What the fingerprint compares: a reduce-scatter's whole input, nothing of an all-to-all's
// counts (they differ by rank), no element size for a barrier.
std::int64_t fingerprint_count(const call& c) {
  switch (c.kind) {
    case collective::all_gather:
    case collective::reduce_scatter:
      return std::accumulate(c.counts.begin(), c.counts.end(), std::int64_t{0});
    case collective::all_to_all:
    case collective::barrier: return 0;
    default: return c.count;
  }
}
}  // namespace

void checked_collectives::attach(ledger* l, int axis, bool fingerprint) {
  ledger_ = l;
  axis_ = axis;
  fingerprint_ = fingerprint;
  sequence_ = 0;
}

void compare_fingerprint(MPI_Comm comm, std::uint64_t sequence, collective kind,
                         std::size_t elem_bytes, std::int64_t count, int root) {
  if (kind == collective::barrier) elem_bytes = 0;
  if (kind != collective::broadcast && kind != collective::reduce) root = -1;
  std::uint64_t h = 1469598103934665603ull;
  for (std::uint64_t v : {sequence, static_cast<std::uint64_t>(kind), std::uint64_t{elem_bytes},
                          static_cast<std::uint64_t>(count), static_cast<std::uint64_t>(root)}) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 1099511628211ull;
  }
  const auto mine = static_cast<long long>(h >> 1);
  const flight::call_record record{kind, count, elem_bytes, root, sequence, comm};
  // Heap-held: a watched exchange the ranks abandon (out of step) keeps its buffer for good.
  // A plain pointer: a thread_local with a destructor would allocate its registration at the
  // declaration, in the kernel's measured scope.
  thread_local long long* held = nullptr;
  long long* both = nullptr;
  {
    const mem::mpi_heap in_mpi;  // what MPI allocates is its own, not the kernel's (nor this)
    if (held == nullptr) held = new long long[2];  // NOLINT(cppcoreguidelines-owning-memory)
    both = held;
    both[0] = mine;
    both[1] = -mine;
    if (flight::watching()) {
      MPI_Request r = MPI_REQUEST_NULL;
      check_mpi(MPI_Iallreduce(MPI_IN_PLACE, both, 2, MPI_LONG_LONG, MPI_MAX, comm, &r),
                "fingerprint");
      try {
        flight::wait_in_call(r, record);
      } catch (const flight::out_of_step&) {
        held = nullptr;  // MPI may still write it: kept for good
        throw;
      }
    } else {
      check_mpi(MPI_Allreduce(MPI_IN_PLACE, both, 2, MPI_LONG_LONG, MPI_MAX, comm), "fingerprint");
    }
    if (both[0] == -both[1]) {
      flight::completed(record);  // what the recorder keeps is not the kernel's either
      return;
    }
  }
  // Every rank saw the mismatch: each one's call at this index, for the message.
  int size = 0, me = 0;
  MPI_Comm_size(comm, &size);
  MPI_Comm_rank(comm, &me);
  const long long call_of_mine[4] = {static_cast<long long>(kind), static_cast<long long>(count),
                                     root, static_cast<long long>(elem_bytes)};
  std::vector<long long> calls(4 * static_cast<std::size_t>(size));
  {
    const mem::mpi_heap in_mpi;
    check_mpi(MPI_Allgather(call_of_mine, 4, MPI_LONG_LONG, calls.data(), 4, MPI_LONG_LONG, comm),
              "fingerprint");
  }
  throw mpi_error(collective_mismatch_text(calls, sequence, me));
}

std::string collective_mismatch_text(const std::vector<long long>& calls, std::uint64_t sequence,
                                     int me) {
  const std::size_t size = calls.size() / 4;
  const auto call_at = [&](std::size_t r) { return calls.data() + 4 * r; };
  const auto same = [&](std::size_t a, std::size_t b) {
    return std::equal(call_at(a), call_at(a) + 4, call_at(b));
  };
  bool sizes_differ = false;
  for (std::size_t r = 1; r < size; ++r) sizes_differ |= call_at(r)[3] != call_at(0)[3];
  // The call most ranks made (the first such on a tie); a tie has no majority.
  std::size_t most = 0, most_n = 0;
  bool tie = false;
  for (std::size_t r = 0; r < size; ++r) {
    std::size_t n = 0;
    for (std::size_t q = 0; q < size; ++q) n += same(r, q) ? 1 : 0;
    if (n > most_n) {
      most = r;
      most_n = n;
      tie = false;
    } else if (n == most_n && !same(r, most)) {
      tie = true;
    }
  }
  std::string out = "collective mismatch: the ranks of a communicator of size " +
                    std::to_string(size) + " disagree at collective #" + std::to_string(sequence) +
                    ":";
  // The ranks making each distinct call, in rank order of their first.
  std::vector<char> told(size, 0);
  for (std::size_t r = 0; r < size; ++r) {
    if (told[r] != 0) continue;
    std::string ranks;
    int n = 0;
    for (std::size_t q = r; q < size; ++q)
      if (same(r, q)) {
        told[q] = 1;
        ranks += (n++ == 0 ? "" : ", ") + std::to_string(q);
      }
    const long long* c = call_at(r);
    out += std::string(r == 0 ? " " : "; ") + (n > 1 ? "ranks " : "rank ") + ranks + " " +
           std::string(to_string(static_cast<collective>(c[0]))) + ", count " +
           std::to_string(c[1]);
    if (c[2] >= 0) out += ", root " + std::to_string(c[2]);
    if (sizes_differ) out += ", " + std::to_string(c[3]) + "-byte elements";
  }
  std::string behind;
  for (std::size_t r = 0; r < size && !tie; ++r)
    if (!same(r, most)) behind += (behind.empty() ? "" : ", ") + std::to_string(r);
  out += tie ? " (no call most ranks made: any of them may be out of step)"
             : "; out of step: rank" +
                   std::string(behind.find(',') != std::string::npos ? "s " : " ") + behind;
  return out + " (this rank: " + std::to_string(me) + ")";
}

void checked_collectives::fingerprint(const call& c) {
  const std::uint64_t seq = sequence_++;
  if (!fingerprint_) return;
  compare_fingerprint(native_handle(), seq, c.kind, c.elem_bytes(), fingerprint_count(c), c.root);
}

void checked_collectives::record(const ledger_entry& e) {
  if (ledger_ != nullptr) ledger_->record(e, axis_);
}

traffic checked_collectives::run(const call& c) {
  validate(c, rank(), size());
  fingerprint(c);
  const traffic t = inner_->run(c);
  record(entry_of(c, rank(), size(), t));
  return t;
}

void checked_collectives::start(const call& c) {
  validate(c, rank(), size());
  if (pending_)
    throw invalid_problem("start_" + std::string(to_string(c.kind)) +
                          ": a non-blocking collective is already pending on this comm");
  fingerprint(c);
  inner_->start(c);
  pending_ = true;
  pending_ledger_ = ledger_;
  if (ledger_ != nullptr) pending_entry_ = ledger_->entries().size();
  record(entry_of(c, rank(), size(), {}));
}

void checked_collectives::finish_started(traffic t) {
  if (pending_ledger_ != nullptr) pending_ledger_->set_bytes(pending_entry_, t.sent, t.received);
  pending_ = false;
  pending_ledger_ = nullptr;
}

bool checked_collectives::test() {
  if (!pending_) return true;
  if (!inner_->test()) return false;
  finish_started(inner_->wait());
  return true;
}

traffic checked_collectives::wait() {
  const traffic t = inner_->wait();
  if (pending_) finish_started(t);
  return t;
}

MPI_Request checked_collectives::send(const message& m) {
  native::check_message(m, size(), "send");
  const MPI_Request r = inner_->send(m);
  record(send_entry(m.count, m.peer, size_of(m.type)));
  return r;
}

std::int64_t checked_collectives::recv(const message& m) {
  native::check_message(m, size(), "recv");
  // Recorded with the buffer's size whatever arrives (a short or long message is the kernel's
  // error, reported by what recv returns).
  record(recv_entry(m.count, m.peer, size_of(m.type)));
  return inner_->recv(m);
}

}  // namespace shardcheck::par
