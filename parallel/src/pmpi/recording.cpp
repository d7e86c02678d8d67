// The recording window of pmpi.hpp. Part of shardcheck::parallel; the MPI_* wrappers that read it
// are the object library shardcheck::pmpi (wrappers.cpp).
#include <algorithm>

#include "pmpi/window.hpp"
#include "shardcheck/parallel/comm.hpp"

// Defined by wrappers.cpp: present exactly when the program links shardcheck::pmpi.
extern "C" [[gnu::weak]] void shardcheck_pmpi_wrappers();

namespace shardcheck::par::pmpi {

namespace detail {

comm_state* window::find(MPI_Comm c) {
  if (c == MPI_COMM_NULL) return nullptr;
  for (comm_state& s : comms)
    if (s.comm == c) return &s;
  return nullptr;
}

void window::derive(MPI_Comm parent, MPI_Comm child) {
  const comm_state* from = find(parent);
  if (from == nullptr || child == MPI_COMM_NULL) return;
  comm_state s;
  s.comm = child;
  s.axis = from->axis;
  PMPI_Comm_rank(child, &s.rank);
  PMPI_Comm_size(child, &s.size);
  comms.push_back(s);
  const auto n = static_cast<std::size_t>(s.size);
  if (counts.size() < n) counts.resize(n);
  if (recv_counts.size() < n) recv_counts.resize(n);
}

void window::forget(MPI_Comm c) {
  std::erase_if(comms, [&](const comm_state& s) { return s.comm == c; });
}

std::span<const std::int64_t> window::widen(std::vector<std::int64_t>& into, const int* c, int n) {
  const auto m = static_cast<std::size_t>(n);
  if (into.size() < m) into.resize(m);
  for (std::size_t i = 0; i < m; ++i) into[i] = c[i];
  return {into.data(), m};
}

std::span<const std::int64_t> window::uniform(std::vector<std::int64_t>& into, int v, int n) {
  const auto m = static_cast<std::size_t>(n);
  if (into.size() < m) into.resize(m);
  std::fill_n(into.begin(), m, std::int64_t{v});
  return {into.data(), m};
}

}  // namespace detail

recording::recording(ledger& log, bool fingerprint, std::span<const tracked_comm> comms)
    : window_(std::make_unique<detail::window>()) {
  if (detail::current != nullptr)
    throw invalid_problem("pmpi::recording: a recording window is already open");
  detail::window& w = *window_;
  w.log = &log;
  w.fingerprint = fingerprint;
  w.comms.reserve(std::max<std::size_t>(64, comms.size()));
  int largest = 1;
  for (const tracked_comm& t : comms) {
    if (t.comm == MPI_COMM_NULL) continue;
    detail::comm_state s;
    s.comm = t.comm;
    s.axis = t.axis;
    check_mpi(PMPI_Comm_rank(t.comm, &s.rank), "MPI_Comm_rank");
    check_mpi(PMPI_Comm_size(t.comm, &s.size), "MPI_Comm_size");
    largest = std::max(largest, s.size);
    w.comms.push_back(s);
  }
  w.counts.resize(static_cast<std::size_t>(largest));
  w.recv_counts.resize(static_cast<std::size_t>(largest));
  detail::current = window_.get();
}

recording::~recording() {
  if (detail::current == window_.get()) detail::current = nullptr;
}

bool linked() { return shardcheck_pmpi_wrappers != nullptr; }

}  // namespace shardcheck::par::pmpi
