#include "shardcheck/parallel/mpi.hpp"

#include <algorithm>
#include <numeric>
#include <utility>

#include "collectives/native.hpp"

namespace shardcheck::par {

namespace {
// Each communicator's reduction segments, for its blocking and its started collectives.
constexpr std::size_t scratch_bytes = std::size_t{1} << 20;
}  // namespace

void check_mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw mpi_error(std::string(what) + ": " + std::string(msg, static_cast<std::size_t>(len)));
}

environment::environment(int& argc, char**& argv) {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (initialised != 0) return;
  int provided = 0;
  check_mpi(MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  owns_ = true;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

environment::~environment() {
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (owns_ && finalised == 0) MPI_Finalize();
}

comm::comm(MPI_Comm c, bool owned) : c_(c), owned_(owned) {
  if (c_ == MPI_COMM_NULL) return;
  check_mpi(MPI_Comm_set_errhandler(c_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  MPI_Comm_rank(c_, &rank_);
  MPI_Comm_size(c_, &size_);
  const auto p = static_cast<std::size_t>(size_);
  counts_a_.resize(p);
  displs_a_.resize(p);
  counts_b_.resize(p);
  displs_b_.resize(p);
  counts64_.resize(p);
  counts_nb_.resize(p);
  displs_nb_.resize(p);
  // Left uninitialised: a collective writes its segments before reading them, and a page no
  // collective touches costs nothing (comms are made per case, several per mesh).
  scratch_.reset(new std::byte[scratch_bytes]);
  scratch_nb_.reset(new std::byte[scratch_bytes]);
  schedule_ = std::make_unique<native::schedule>();
}

comm comm::world() { return comm(MPI_COMM_WORLD, false); }

comm::~comm() {
  if (owned_ && c_ != MPI_COMM_NULL) MPI_Comm_free(&c_);
}

comm::comm(comm&& o) noexcept { *this = std::move(o); }

comm& comm::operator=(comm&& o) noexcept {
  if (this == &o) return *this;
  if (owned_ && c_ != MPI_COMM_NULL) MPI_Comm_free(&c_);
  c_ = std::exchange(o.c_, MPI_COMM_NULL);
  owned_ = std::exchange(o.owned_, false);
  rank_ = o.rank_;
  size_ = o.size_;
  ledger_ = std::exchange(o.ledger_, nullptr);
  axis_ = o.axis_;
  checked_ = o.checked_;
  sequence_ = o.sequence_;
  backend_ = o.backend_;
  defect_ = o.defect_;
  scratch_ = std::move(o.scratch_);
  counts_a_ = std::move(o.counts_a_);
  displs_a_ = std::move(o.displs_a_);
  counts_b_ = std::move(o.counts_b_);
  displs_b_ = std::move(o.displs_b_);
  counts64_ = std::move(o.counts64_);
  pending_ = std::exchange(o.pending_, MPI_REQUEST_NULL);
  schedule_ = std::move(o.schedule_);
  scheduled_ = std::exchange(o.scheduled_, false);
  scratch_nb_ = std::move(o.scratch_nb_);
  counts_nb_ = std::move(o.counts_nb_);
  displs_nb_ = std::move(o.displs_nb_);
  pending_ledger_ = std::exchange(o.pending_ledger_, nullptr);
  pending_entry_ = o.pending_entry_;
  return *this;
}

comm comm::split(int color, int key) const {
  MPI_Comm out = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split(c_, color < 0 ? MPI_UNDEFINED : color, key, &out), "MPI_Comm_split");
  return comm(out, true);
}

std::span<const std::int64_t> comm::scaled_counts(const partition& parts, std::int64_t scale) {
  if (parts.parts() != size_)
    throw invalid_problem("collective: a partition of " + std::to_string(parts.parts()) +
                          " parts for " + std::to_string(size_) + " ranks");
  for (int r = 0; r < size_; ++r) counts64_[static_cast<std::size_t>(r)] = parts.size(r) * scale;
  return counts64_;
}

void comm::to_counts(std::span<const std::int64_t> counts, std::vector<int>& c,
                     std::vector<int>& d) const {
  if (counts.size() != static_cast<std::size_t>(size_))
    throw invalid_problem("collective: " + std::to_string(counts.size()) + " counts for " +
                          std::to_string(size_) + " ranks");
  std::int64_t off = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    if (counts[r] < 0 || counts[r] > INT32_MAX || off > INT32_MAX)
      throw invalid_problem("collective: count out of range for MPI");
    c[r] = static_cast<int>(counts[r]);
    d[r] = static_cast<int>(off);
    off += counts[r];
  }
}

std::int64_t comm::gather_counts(std::size_t buffer, std::span<const std::int64_t> counts,
                                std::vector<int>& c, std::vector<int>& d,
                                std::string_view what) const {
  to_counts(counts, c, d);
  const std::int64_t total = std::accumulate(counts.begin(), counts.end(), std::int64_t{0});
  if (static_cast<std::int64_t>(buffer) != total) {
    std::string msg(what);
    msg += ": buffer of " + std::to_string(buffer);
    msg += " elements for counts totalling " + std::to_string(total);
    throw invalid_problem(msg);
  }
  return total;
}

std::int64_t comm::scatter_counts(std::size_t in, std::size_t out,
                                 std::span<const std::int64_t> counts, std::vector<int>& c,
                                 std::vector<int>& d, std::string_view what) const {
  to_counts(counts, c, d);
  const std::int64_t total = std::accumulate(counts.begin(), counts.end(), std::int64_t{0});
  if (static_cast<std::int64_t>(in) != total ||
      static_cast<std::int64_t>(out) != counts[static_cast<std::size_t>(rank_)]) {
    std::string msg(what);
    msg += ": buffer sizes disagree with the counts";
    throw invalid_problem(msg);
  }
  return total;
}

std::int64_t comm::reduce_count(std::size_t n, std::string_view what) {
  if (n > INT32_MAX) {
    std::string msg(what);
    msg += ": count out of range for MPI";
    throw invalid_problem(msg);
  }
  return static_cast<std::int64_t>(n);
}

void comm::fingerprint(collective kind, std::size_t elem_bytes, std::int64_t count, int root) {
  const std::uint64_t seq = sequence_++;
  if (!checked_) return;
  std::uint64_t h = 1469598103934665603ull;
  for (std::uint64_t v : {seq, static_cast<std::uint64_t>(kind), std::uint64_t{elem_bytes},
                          static_cast<std::uint64_t>(count), static_cast<std::uint64_t>(root)}) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 1099511628211ull;
  }
  const auto mine = static_cast<long long>(h >> 1);
  long long both[2] = {mine, -mine};
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, both, 2, MPI_LONG_LONG, MPI_MAX, c_), "fingerprint");
  if (both[0] != -both[1])
    throw mpi_error("collective mismatch: the ranks of a communicator of size " +
                    std::to_string(size_) + " disagree at collective #" + std::to_string(seq) +
                    " (this rank: " + std::string(to_string(kind)) + ", count " +
                    std::to_string(count) + ", root " + std::to_string(root) + ")");
}

native::channel comm::channel(bool started) {
  std::byte* scratch = (started ? scratch_nb_ : scratch_).get();
  return native::channel{c_,      rank_,   size_, {scratch, scratch != nullptr ? scratch_bytes : 0},
                         defect_, started, 0,     0};
}

void comm::record_native(ledger_entry e, const native::channel& ch) {
  e.bytes_sent = ch.sent;
  e.bytes_received = ch.received;
  record(e);
}

template <class T>
void comm::all_gather(std::span<T> buffer, std::span<const std::int64_t> counts) {
  const std::int64_t total =
      gather_counts(buffer.size(), counts, counts_a_, displs_a_, "all_gather");
  fingerprint(collective::all_gather, sizeof(T), total, -1);
  const ledger_entry e = all_gather_entry(backend_, counts, rank_, sizeof(T));
  if (backend_ == backend::native) {
    auto run = native::all_gather<T>(channel(), buffer.data(), counts_a_, displs_a_);
    run.wait();
    return record_native(e, run.counted());
  }
  check_mpi(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buffer.data(), counts_a_.data(),
                           displs_a_.data(), mpi_type<T>(), c_),
            "MPI_Allgatherv");
  record(e);
}

template <class T>
void comm::all_reduce_sum(std::span<T> buffer) {
  const std::int64_t n = reduce_count(buffer.size(), "all_reduce");
  fingerprint(collective::all_reduce, sizeof(T), n, -1);
  const ledger_entry e = all_reduce_entry(backend_, n, rank_, size_, sizeof(T));
  if (backend_ == backend::native) {
    auto run = native::all_reduce<T>(channel(), buffer, counts_a_, displs_a_);
    run.wait();
    return record_native(e, run.counted());
  }
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, buffer.data(), static_cast<int>(n), mpi_type<T>(), MPI_SUM,
                          c_),
            "MPI_Allreduce");
  record(e);
}

template <class T>
void comm::reduce_scatter_sum(std::span<const T> in, std::span<T> out,
                              std::span<const std::int64_t> counts) {
  const std::int64_t total =
      scatter_counts(in.size(), out.size(), counts, counts_a_, displs_a_, "reduce_scatter");
  fingerprint(collective::reduce_scatter, sizeof(T), total, -1);
  const ledger_entry e = reduce_scatter_entry(backend_, counts, rank_, sizeof(T));
  if (backend_ == backend::native) {
    auto run = native::reduce_scatter<T>(channel(), in.data(), out.data(), counts_a_, displs_a_);
    run.wait();
    return record_native(e, run.counted());
  }
  check_mpi(MPI_Reduce_scatter(in.data(), out.data(), counts_a_.data(), mpi_type<T>(), MPI_SUM,
                               c_),
            "MPI_Reduce_scatter");
  record(e);
}

namespace {
constexpr int p2p_tag_base = 1 << 13;  // above every native collective's tags
void check_p2p(std::size_t n, int peer, int tag, int size, const char* what) {
  if (peer < 0 || peer >= size || tag < 0 || tag >= comm::max_p2p_tag ||
      n > static_cast<std::size_t>(INT32_MAX))
    throw invalid_problem(std::string(what) + ": peer " + std::to_string(peer) + ", tag " +
                          std::to_string(tag) + " or count " + std::to_string(n) +
                          " out of range");
}
}  // namespace

template <class T>
MPI_Request comm::start_send(std::span<const T> data, int peer, int tag) {
  check_p2p(data.size(), peer, tag, size_, "send");
  MPI_Request r = MPI_REQUEST_NULL;
  check_mpi(MPI_Isend(data.data(), static_cast<int>(data.size()), mpi_type<T>(), peer,
                      p2p_tag_base + tag, c_, &r),
            "MPI_Isend");
  record(send_entry(static_cast<std::int64_t>(data.size()), peer, sizeof(T)));
  return r;
}

void comm::wait_send(MPI_Request& request) {
  check_mpi(MPI_Wait(&request, MPI_STATUS_IGNORE), "MPI_Wait (send)");
}

template <class T>
std::int64_t comm::recv(std::span<T> data, int peer, int tag) {
  check_p2p(data.size(), peer, tag, size_, "recv");
  MPI_Status st;
  const int rc = MPI_Recv(data.data(), static_cast<int>(data.size()), mpi_type<T>(), peer,
                          p2p_tag_base + tag, c_, &st);
  record(recv_entry(static_cast<std::int64_t>(data.size()), peer, sizeof(T)));
  if (rc != MPI_SUCCESS) {
    int cls = 0;
    MPI_Error_class(rc, &cls);
    if (cls == MPI_ERR_TRUNCATE) return static_cast<std::int64_t>(data.size()) + 1;
    check_mpi(rc, "MPI_Recv");
  }
  int got = 0;
  check_mpi(MPI_Get_count(&st, mpi_type<T>(), &got), "MPI_Get_count");
  return got;
}

template <class T>
void comm::broadcast(std::span<T> buffer, int root) {
  if (root < 0 || root >= size_) throw invalid_problem("broadcast: root out of range");
  if (buffer.size() > INT32_MAX) throw invalid_problem("broadcast: count out of range for MPI");
  const auto n = static_cast<std::int64_t>(buffer.size());
  fingerprint(collective::broadcast, sizeof(T), n, root);
  const ledger_entry e = broadcast_entry(backend_, n, root, rank_, size_, sizeof(T));
  if (backend_ == backend::native) {
    auto ch = channel();
    native::broadcast<T>(ch, buffer, root);
    return record_native(e, ch);
  }
  check_mpi(MPI_Bcast(buffer.data(), static_cast<int>(n), mpi_type<T>(), root, c_), "MPI_Bcast");
  record(e);
}

template <class T>
void comm::all_to_all(std::span<const T> in, std::span<const std::int64_t> send_counts,
                      std::span<T> out, std::span<const std::int64_t> recv_counts) {
  to_counts(send_counts, counts_a_, displs_a_);
  to_counts(recv_counts, counts_b_, displs_b_);
  fingerprint(collective::all_to_all, sizeof(T), 0, -1);
  const ledger_entry e = all_to_all_entry(backend_, send_counts, recv_counts, rank_, sizeof(T));
  if (backend_ == backend::native) {
    auto ch = channel();
    native::all_to_all<T>(ch, in.data(), counts_a_, displs_a_, out.data(), counts_b_, displs_b_);
    return record_native(e, ch);
  }
  check_mpi(MPI_Alltoallv(in.data(), counts_a_.data(), displs_a_.data(), mpi_type<T>(), out.data(),
                          counts_b_.data(), displs_b_.data(), mpi_type<T>(), c_),
            "MPI_Alltoallv");
  record(e);
}

void comm::barrier() {
  fingerprint(collective::barrier, 0, 0, -1);
  check_mpi(MPI_Barrier(c_), "MPI_Barrier");
  ledger_entry e;
  e.kind = collective::barrier;
  record(e);
}

void comm::begin_started(collective kind, std::size_t elem_bytes, std::int64_t count) {
  if (pending_ != MPI_REQUEST_NULL || scheduled_)
    throw invalid_problem("start_" + std::string(to_string(kind)) +
                          ": a non-blocking collective is already pending on this comm");
  fingerprint(kind, elem_bytes, count, -1);
}

void comm::record_started(const ledger_entry& e) {
  pending_ledger_ = scheduled_ ? ledger_ : nullptr;
  if (ledger_ != nullptr) pending_entry_ = ledger_->entries().size();
  record(e);
}

void comm::finish_started() {
  if (!scheduled_) return;
  scheduled_ = false;
  const native::channel& ch = schedule_->counted();
  if (pending_ledger_ != nullptr) pending_ledger_->set_bytes(pending_entry_, ch.sent, ch.received);
  pending_ledger_ = nullptr;
}

template <class T>
void comm::start_all_gather(std::span<T> buffer, std::span<const std::int64_t> counts) {
  const std::int64_t total =
      gather_counts(buffer.size(), counts, counts_nb_, displs_nb_, "start_all_gather");
  begin_started(collective::all_gather, sizeof(T), total);
  if (backend_ == backend::native) {
    *schedule_ = native::all_gather<T>(channel(true), buffer.data(), counts_nb_, displs_nb_);
    scheduled_ = true;
  } else {
    check_mpi(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buffer.data(), counts_nb_.data(),
                              displs_nb_.data(), mpi_type<T>(), c_, &pending_),
              "MPI_Iallgatherv");
  }
  record_started(all_gather_entry(backend_, counts, rank_, sizeof(T)));
  test_pending();
}

template <class T>
void comm::start_reduce_scatter_sum(std::span<const T> in, std::span<T> out,
                                    std::span<const std::int64_t> counts) {
  const std::int64_t total = scatter_counts(in.size(), out.size(), counts, counts_nb_,
                                           displs_nb_, "start_reduce_scatter");
  begin_started(collective::reduce_scatter, sizeof(T), total);
  if (backend_ == backend::native) {
    *schedule_ =
        native::reduce_scatter<T>(channel(true), in.data(), out.data(), counts_nb_, displs_nb_);
    scheduled_ = true;
  } else {
    check_mpi(MPI_Ireduce_scatter(in.data(), out.data(), counts_nb_.data(), mpi_type<T>(), MPI_SUM,
                                  c_, &pending_),
              "MPI_Ireduce_scatter");
  }
  record_started(reduce_scatter_entry(backend_, counts, rank_, sizeof(T)));
  test_pending();
}

template <class T>
void comm::start_all_reduce_sum(std::span<T> buffer) {
  const std::int64_t n = reduce_count(buffer.size(), "start_all_reduce");
  begin_started(collective::all_reduce, sizeof(T), n);
  if (backend_ == backend::native) {
    *schedule_ = native::all_reduce<T>(channel(true), buffer, counts_nb_, displs_nb_);
    scheduled_ = true;
  } else {
    check_mpi(MPI_Iallreduce(MPI_IN_PLACE, buffer.data(), static_cast<int>(n), mpi_type<T>(),
                             MPI_SUM, c_, &pending_),
              "MPI_Iallreduce");
  }
  record_started(all_reduce_entry(backend_, n, rank_, size_, sizeof(T)));
  test_pending();
}

bool comm::test_pending() {
  if (scheduled_) {
    if (!schedule_->test()) return false;
    finish_started();
    return true;
  }
  if (pending_ == MPI_REQUEST_NULL) return true;
  int done = 0;
  check_mpi(MPI_Test(&pending_, &done, MPI_STATUS_IGNORE), "MPI_Test");
  return done != 0;
}

void comm::wait_pending() {
  if (scheduled_) {
    schedule_->wait();
    finish_started();
  } else if (pending_ != MPI_REQUEST_NULL) {
    check_mpi(MPI_Wait(&pending_, MPI_STATUS_IGNORE), "MPI_Wait");
  }
}

std::span<const std::int64_t> comm::window_counts(const partition& parts, std::int64_t lo,
                                                  std::int64_t hi, std::int64_t scale) {
  if (parts.parts() != size_)
    throw invalid_problem("collective: a partition of " + std::to_string(parts.parts()) +
                          " parts for " + std::to_string(size_) + " ranks");
  for (int r = 0; r < size_; ++r) {
    const std::int64_t a = std::max(lo, parts.offset(r));
    const std::int64_t b = std::min(hi, parts.offset(r) + parts.size(r));
    counts64_[static_cast<std::size_t>(r)] = std::max<std::int64_t>(b - a, 0) * scale;
  }
  return counts64_;
}

#define SHARDCHECK_COMM_INSTANTIATE(T)                                                        \
  template void comm::all_gather<T>(std::span<T>, std::span<const std::int64_t>);             \
  template void comm::start_all_gather<T>(std::span<T>, std::span<const std::int64_t>);       \
  template void comm::start_reduce_scatter_sum<T>(std::span<const T>, std::span<T>,           \
                                                  std::span<const std::int64_t>);             \
  template void comm::start_all_reduce_sum<T>(std::span<T>);                                  \
  template void comm::all_reduce_sum<T>(std::span<T>);                                        \
  template void comm::reduce_scatter_sum<T>(std::span<const T>, std::span<T>,                 \
                                            std::span<const std::int64_t>);                   \
  template void comm::broadcast<T>(std::span<T>, int);                                        \
  template MPI_Request comm::start_send<T>(std::span<const T>, int, int);                     \
  template std::int64_t comm::recv<T>(std::span<T>, int, int);                                \
  template void comm::all_to_all<T>(std::span<const T>, std::span<const std::int64_t>,        \
                                    std::span<T>, std::span<const std::int64_t>);
SHARDCHECK_COMM_INSTANTIATE(float)
SHARDCHECK_COMM_INSTANTIATE(double)
#undef SHARDCHECK_COMM_INSTANTIATE

mesh::mesh(const comm& base, std::vector<int> dims) : dims_(std::move(dims)) {
  const int product = std::accumulate(dims_.begin(), dims_.end(), 1, std::multiplies<>());
  if (product != base.size())
    throw invalid_problem("mesh: dims multiply to " + std::to_string(product) + ", not " +
                          std::to_string(base.size()));
  const int n = static_cast<int>(dims_.size());
  std::vector<int> periods(dims_.size(), 0);
  MPI_Comm cart = MPI_COMM_NULL;
  check_mpi(MPI_Cart_create(base.native_handle(), n, dims_.data(), periods.data(), 0, &cart),
            "MPI_Cart_create");
  all_ = comm(cart, true);
  coords_.assign(dims_.size(), 0);
  check_mpi(MPI_Cart_coords(cart, all_.rank(), n, coords_.data()), "MPI_Cart_coords");
  for (int a = 0; a < n; ++a) {
    std::vector<int> keep(dims_.size(), 0);
    keep[static_cast<std::size_t>(a)] = 1;
    MPI_Comm sub = MPI_COMM_NULL;
    check_mpi(MPI_Cart_sub(cart, keep.data(), &sub), "MPI_Cart_sub");
    axes_.emplace_back(sub, true);
  }
}

void mesh::set_backend(backend b) {
  all_.set_backend(b);
  for (auto& a : axes_) a.set_backend(b);
}

void mesh::set_defect(collective_defect d) {
  all_.set_defect(d);
  for (auto& a : axes_) a.set_defect(d);
}

void mesh::attach(ledger* l, bool checked) {
  all_.attach(l, -1);
  all_.set_checked(checked);
  all_.reset_sequence();
  for (std::size_t a = 0; a < axes_.size(); ++a) {
    axes_[a].attach(l, static_cast<int>(a));
    axes_[a].set_checked(checked);
    axes_[a].reset_sequence();
  }
}

}  // namespace shardcheck::par
