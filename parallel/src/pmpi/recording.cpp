// The recording window of pmpi.hpp. Part of shardcheck::parallel; the MPI_* wrappers that read it
// are the object library shardcheck::pmpi (wrappers.cpp).
#include <algorithm>
#include <climits>
#include <thread>

#include "pmpi/window.hpp"
#include "shardcheck/parallel/comm.hpp"
#include "shardcheck/parallel/flight.hpp"

// Defined by wrappers.cpp: present exactly when the program links shardcheck::pmpi.
extern "C" [[gnu::weak]] void shardcheck_pmpi_wrappers();

namespace shardcheck::par::pmpi {

namespace detail {

namespace {
constexpr int no_axis = INT_MIN;
constexpr std::size_t reserved = 64;
}  // namespace

comm_state* window::find(MPI_Comm c) {
  if (c == MPI_COMM_NULL) return nullptr;
  for (comm_state& s : comms)
    if (s.comm == c) return &s;
  return nullptr;
}

MPI_Group window::group_of(int axis) const {
  for (const axis_group& g : groups)
    if (g.axis == axis) return g.group;
  return MPI_GROUP_NULL;
}

int window::matching_axis(MPI_Group g, int none) const {
  for (const axis_group& a : groups) {
    int same = MPI_UNEQUAL;
    PMPI_Group_compare(g, a.group, &same);
    if (same == MPI_IDENT || same == MPI_SIMILAR) return a.axis;
  }
  return none;
}

comm_state window::place(MPI_Comm c, MPI_Group group, int axis, MPI_Group to) {
  comm_state s;
  s.comm = c;
  s.axis = axis;
  PMPI_Comm_rank(c, &s.rank);
  PMPI_Comm_size(c, &s.size);
  const auto n = static_cast<std::size_t>(s.size);
  if (counts.size() < n) counts.resize(n);
  if (recv_counts.size() < n) recv_counts.resize(n);
  if (displs.size() < n) displs.resize(n);
  if (to == MPI_GROUP_NULL) return s;
  // ranks[at + i]: rank i of c in `to`, through a scratch of 0, 1, … after it.
  const std::size_t at = ranks.size();
  ranks.resize(at + 2 * n);
  for (std::size_t i = 0; i < n; ++i) ranks[at + n + i] = static_cast<int>(i);
  PMPI_Group_translate_ranks(group, s.size, ranks.data() + at + n, to, ranks.data() + at);
  bool same = true;
  for (std::size_t i = 0; i < n; ++i) same = same && ranks[at + i] == static_cast<int>(i);
  ranks.resize(same ? at : at + n);
  if (!same) s.ranks_at = static_cast<std::int64_t>(at);
  return s;
}

comm_state* window::find_or_adopt(MPI_Comm c) {
  if (comm_state* s = find(c)) return s;
  if (c == MPI_COMM_NULL || std::find(foreign.begin(), foreign.end(), c) != foreign.end())
    return nullptr;
  int inter = 0;
  PMPI_Comm_test_inter(c, &inter);
  MPI_Group g = MPI_GROUP_NULL;
  if (inter == 0) PMPI_Comm_group(c, &g);
  const int axis = inter != 0 ? no_axis : matching_axis(g, no_axis);
  if (axis == no_axis) {
    foreign.push_back(c);
  } else {
    comms.push_back(place(c, g, axis, group_of(axis)));
  }
  if (g != MPI_GROUP_NULL) PMPI_Group_free(&g);
  return axis == no_axis ? nullptr : &comms.back();
}

void window::derive(MPI_Comm parent, MPI_Comm child) {
  const comm_state* from = find_or_adopt(parent);
  if (from == nullptr || child == MPI_COMM_NULL) return;
  const int parent_axis = from->axis;
  MPI_Group g = MPI_GROUP_NULL;
  PMPI_Comm_group(child, &g);
  const int axis = matching_axis(g, parent_axis);
  comms.push_back(place(child, g, axis, group_of(axis)));
  PMPI_Group_free(&g);
}

void window::forget(MPI_Comm c) {
  std::erase_if(comms, [&](const comm_state& s) { return s.comm == c; });
  std::erase(foreign, c);
}

rma_state* window::find_window(MPI_Win w) {
  if (w == MPI_WIN_NULL) return nullptr;
  for (rma_state& r : windows)
    if (r.win == w) return &r;
  return nullptr;
}

void window::open_rma(MPI_Comm c, MPI_Win w) { windows.push_back({w, c, false}); }

void window::close_rma(MPI_Win w) {
  for (rma_state& r : windows)
    if (r.win == w && r.owned) {
      forget(r.comm);
      if (!flight::abandoned(r.comm) && !flight::keeps_communicators()) {
        flight::forget(r.comm);
        PMPI_Comm_free(&r.comm);
      }
    }
  std::erase_if(windows, [&](const rma_state& r) { return r.win == w; });
}

void window::free_comm(MPI_Comm c) {
  for (rma_state& r : windows) {
    const comm_state* s = find(c);
    if (r.comm != c || s == nullptr) continue;
    comm_state copy = *s;
    PMPI_Comm_dup(c, &copy.comm);
    comms.push_back(copy);
    r.comm = copy.comm;
    r.owned = true;
  }
  forget(c);
}

void window::record(const comm_state& s, ledger_entry e) {
  e.root = axis_rank(s, e.root);
  log->record(e, s.axis);
}

int window::axis_rank(const comm_state& s, int r) const {
  if (s.ranks_at < 0 || r < 0 || r >= s.size) return r;
  const int q = ranks[static_cast<std::size_t>(s.ranks_at) + static_cast<std::size_t>(r)];
  return q == MPI_UNDEFINED ? r : q;
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

void detail::window::perturb() {
  if (stir.max_delay.count() <= 0) return;
  const auto now = std::chrono::steady_clock::now();
  if (now < stir_quiet) return;
  const auto span = static_cast<std::uint64_t>(stir.max_delay.count()) + 1;
  const std::chrono::microseconds delay{static_cast<std::int64_t>(next_stir() % span)};
  if (delay.count() > 0) std::this_thread::sleep_for(delay);
  stir_quiet = std::chrono::steady_clock::now() +
               std::chrono::microseconds{static_cast<std::int64_t>(next_stir() % (2 * span - 1))};
}

std::uint64_t detail::window::next_stir() {
  // splitmix64: a stream fixed by the seed
  std::uint64_t z = (stir_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

recording::recording(ledger& log, bool fingerprint, std::span<const tracked_comm> comms,
                     interceptor* hook, perturbation stir)
    : window_(std::make_unique<detail::window>()) {
  if (detail::current != nullptr)
    throw invalid_problem("pmpi::recording: a recording window is already open");
  detail::window& w = *window_;
  w.log = &log;
  w.fingerprint = fingerprint;
  w.hook = hook;
  w.stir = stir;
  w.stir_state = stir.seed;
  w.comms.reserve(std::max(detail::reserved, comms.size()));
  w.foreign.reserve(detail::reserved);
  w.windows.reserve(detail::reserved);
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
    detail::axis_group g{t.axis, MPI_GROUP_NULL};
    check_mpi(PMPI_Comm_group(t.comm, &g.group), "MPI_Comm_group");
    w.groups.push_back(g);
  }
  // The axes in order, the whole mesh last: a communicator with a 1-D mesh's ranks is its axis.
  std::stable_sort(w.groups.begin(), w.groups.end(), [](const auto& a, const auto& b) {
    return (a.axis < 0 ? INT_MAX : a.axis) < (b.axis < 0 ? INT_MAX : b.axis);
  });
  const auto n = static_cast<std::size_t>(largest);
  w.counts.resize(n);
  w.recv_counts.resize(n);
  w.displs.resize(n);
  w.ranks.reserve(detail::reserved * 2 * n);
  detail::current = window_.get();
}

recording::~recording() {
  if (detail::current == window_.get()) detail::current = nullptr;
  const internal own;
  for (detail::rma_state& r : window_->windows)
    if (r.owned && !flight::abandoned(r.comm) && !flight::keeps_communicators()) {
      flight::forget(r.comm);
      PMPI_Comm_free(&r.comm);
    }
  for (detail::axis_group& g : window_->groups) PMPI_Group_free(&g.group);
}

bool linked() { return shardcheck_pmpi_wrappers != nullptr; }

}  // namespace shardcheck::par::pmpi
