#pragma once
// A thin RAII layer over MPI. Error policy: every communicator shardcheck creates or wraps uses
// MPI_ERRORS_RETURN, and a failing call throws shardcheck::mpi_error with MPI's message.
// Every collective a strategy issues goes through `comm`, which records it in the attached ledger
// and, when checking is on, first compares a fingerprint (sequence number, kind, element size,
// count, root) across the ranks, so that mismatched collectives fail with a clear message on
// every rank instead of hanging.
// A comm runs its collectives on a backend (set_backend): `mpi`, Open MPI's built-ins, or
// `native`, shardcheck's own algorithms on point-to-point messages (parallel/src/collectives/),
// for which the ledger records the bytes really sent and received, counted message by message.
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "shardcheck/parallel/ledger.hpp"
#include "shardcheck/parallel/partition.hpp"
#include "shardcheck/reference/types.hpp"

namespace shardcheck::par {

namespace native {
struct channel;
class schedule;
}  // namespace native

void check_mpi(int rc, const char* what);

// Initialises MPI (funneled threads) unless already initialised; finalises in its destructor only
// if it initialised.
class environment {
 public:
  environment(int& argc, char**& argv);
  ~environment();
  environment(const environment&) = delete;
  environment& operator=(const environment&) = delete;

 private:
  bool owns_ = false;
};

template <class T>
MPI_Datatype mpi_type();
template <>
inline MPI_Datatype mpi_type<float>() {
  return MPI_FLOAT;
}
template <>
inline MPI_Datatype mpi_type<double>() {
  return MPI_DOUBLE;
}

// Deliberate defects of the native collectives, used only by shardcheck's mutants.
enum class collective_defect {
  none,
  ring_short_by_one,           // ring all-gather runs p − 2 steps: one chunk never arrives
  broadcast_root_zero,         // broadcast always from rank 0, whatever the root
  all_reduce_no_gather,        // ring all-reduce stops after its reduce-scatter phase
  reduce_scatter_even_counts,  // reduce-scatter-v reads chunks where an even split would put them
  nonblocking_short_by_one,    // a started ring collective ends one step early
};

class comm {
 public:
  comm() = default;
  // Wraps `c`; frees it on destruction if `owned` (WORLD and SELF are never owned).
  comm(MPI_Comm c, bool owned);
  static comm world();
  ~comm();
  comm(comm&& o) noexcept;
  comm& operator=(comm&& o) noexcept;
  comm(const comm&) = delete;
  comm& operator=(const comm&) = delete;

  [[nodiscard]] int rank() const { return rank_; }
  [[nodiscard]] int size() const { return size_; }
  [[nodiscard]] bool valid() const { return c_ != MPI_COMM_NULL; }
  [[nodiscard]] MPI_Comm native_handle() const { return c_; }

  // \note collective over this comm. Ranks passing a negative colour get an invalid comm.
  [[nodiscard]] comm split(int color, int key) const;

  // Point-to-point messages (a pipeline's activations and gradients), ledgered as send / recv
  // entries with the peer. Tags are the caller's, 0 ≤ tag < max_p2p_tag, and never meet the native
  // collectives' messages. A send is non-blocking: it is recorded when posted and its buffer must
  // stay alive and untouched until wait_send(request). A receive blocks and returns how many
  // elements arrived; a message longer than the buffer fills it and returns buffer.size() + 1, so
  // a caller that finds the wrong count can report it after the schedule instead of hanging it.
  static constexpr int max_p2p_tag = 16384;
  template <class T>
  [[nodiscard]] MPI_Request start_send(std::span<const T> data, int peer, int tag);
  static void wait_send(MPI_Request& request);
  template <class T>
  std::int64_t recv(std::span<T> data, int peer, int tag);

  // Attaches a ledger (not owned) and the mesh axis this comm stands for; nullptr detaches.
  void attach(ledger* l, int axis = 0) {
    ledger_ = l;
    axis_ = axis;
  }
  void set_checked(bool on) { checked_ = on; }
  void set_backend(backend b) { backend_ = b; }
  [[nodiscard]] backend collectives_backend() const { return backend_; }
  void set_defect(collective_defect d) { defect_ = d; }
  void reset_sequence() { sequence_ = 0; }

  // \note collective over this comm. In place: rank r's part is buffer[displ_r, displ_r+counts[r]).
  template <class T>
  void all_gather(std::span<T> buffer, std::span<const std::int64_t> counts);
  // \note collective over this comm. The same with counts[r] = parts.size(r)·scale, taken from
  // scratch the communicator owns, so the call allocates nothing.
  template <class T>
  void all_gather(std::span<T> buffer, const partition& parts, std::int64_t scale) {
    all_gather<T>(buffer, scaled_counts(parts, scale));
  }
  // \note collective over this comm. In place, sum.
  template <class T>
  void all_reduce_sum(std::span<T> buffer);
  // \note collective over this comm. in: Σcounts elements; out: counts[rank] elements, the sum of
  // every rank's part `rank`.
  template <class T>
  void reduce_scatter_sum(std::span<const T> in, std::span<T> out,
                          std::span<const std::int64_t> counts);
  // \note collective over this comm. counts[r] = parts.size(r)·scale, without allocating.
  template <class T>
  void reduce_scatter_sum(std::span<const T> in, std::span<T> out, const partition& parts,
                          std::int64_t scale) {
    reduce_scatter_sum<T>(in, out, scaled_counts(parts, scale));
  }
  // \note collective over this comm.
  template <class T>
  void broadcast(std::span<T> buffer, int root);
  // \note collective over this comm. Parts are contiguous in rank order in both buffers.
  template <class T>
  void all_to_all(std::span<const T> in, std::span<const std::int64_t> send_counts,
                  std::span<T> out, std::span<const std::int64_t> recv_counts);
  // \note collective over this comm.
  void barrier();

  // Non-blocking forms: start_* begins the collective and returns; at most one is pending per
  // comm. It is fingerprinted and recorded in the ledger when started; on the native backend the
  // entry's bytes are those counted once it completes (the same as the blocking form's). Its
  // buffers must stay alive and untouched until wait_pending() returns. test_pending() moves it on
  // and says if it is done: call it between chunks of work (Open MPI advances its non-blocking
  // collectives, and shardcheck its native schedules, only inside such calls).
  // \note collective over this comm. In place, as all_gather.
  template <class T>
  void start_all_gather(std::span<T> buffer, std::span<const std::int64_t> counts);
  // \note collective over this comm. As reduce_scatter_sum.
  template <class T>
  void start_reduce_scatter_sum(std::span<const T> in, std::span<T> out,
                                std::span<const std::int64_t> counts);
  // \note collective over this comm. In place, sum.
  template <class T>
  void start_all_reduce_sum(std::span<T> buffer);
  bool test_pending();
  void wait_pending();
  // The names sharded weights and its benchmark call.
  bool test_all_gather() { return test_pending(); }
  void wait_all_gather() { wait_pending(); }
  // counts[r] = |[lo, hi) ∩ part r|·scale: each rank's share of a window of a partitioned
  // dimension. In the communicator's scratch (no allocation), valid until the next call.
  [[nodiscard]] std::span<const std::int64_t> window_counts(const partition& parts,
                                                            std::int64_t lo, std::int64_t hi,
                                                            std::int64_t scale);

 private:
  void fingerprint(collective kind, std::size_t elem_bytes, std::int64_t count, int root);
  void record(const ledger_entry& e) {
    if (ledger_ != nullptr) ledger_->record(e, axis_);
  }
  [[nodiscard]] native::channel channel(bool started = false);
  void record_native(ledger_entry e, const native::channel& ch);
  // Checks that nothing is pending and fingerprints a started collective.
  void begin_started(collective kind, std::size_t elem_bytes, std::int64_t count);
  // Records a started collective's entry; a native one's bytes are filled in when it completes.
  void record_started(const ledger_entry& e);
  void finish_started();
  std::span<const std::int64_t> scaled_counts(const partition& parts, std::int64_t scale);
  void to_counts(std::span<const std::int64_t> counts, std::vector<int>& c,
                 std::vector<int>& d) const;
  // to_counts, then checks an all-gather's buffer (returns Σcounts) or a reduce-scatter's two;
  // `what` names the call in the error.
  std::int64_t gather_counts(std::size_t buffer, std::span<const std::int64_t> counts,
                             std::vector<int>& c, std::vector<int>& d, std::string_view what) const;
  std::int64_t scatter_counts(std::size_t in, std::size_t out, std::span<const std::int64_t> counts,
                              std::vector<int>& c, std::vector<int>& d,
                              std::string_view what) const;
  // An all-reduce's element count, checked to fit MPI's int.
  static std::int64_t reduce_count(std::size_t n, std::string_view what);
  MPI_Comm c_ = MPI_COMM_NULL;
  bool owned_ = false;
  int rank_ = 0, size_ = 0;
  ledger* ledger_ = nullptr;
  int axis_ = 0;
  bool checked_ = false;
  std::uint64_t sequence_ = 0;
  backend backend_ = backend::mpi;
  collective_defect defect_ = collective_defect::none;
  // The native reductions' segments: allocated with the comm, outside any measured scope.
  std::unique_ptr<std::byte[]> scratch_;
  // Scratch, sized at construction, so that collectives allocate nothing.
  std::vector<int> counts_a_, displs_a_, counts_b_, displs_b_;
  std::vector<std::int64_t> counts64_;
  // The pending non-blocking collective: an MPI request (backend mpi) or a native schedule (owned,
  // allocated with the comm), with its own counts and reduction scratch (it may run while a
  // blocking collective uses the others), and where its ledger entry is.
  MPI_Request pending_ = MPI_REQUEST_NULL;
  std::unique_ptr<native::schedule> schedule_;
  bool scheduled_ = false;
  std::unique_ptr<std::byte[]> scratch_nb_;
  std::vector<int> counts_nb_, displs_nb_;
  ledger* pending_ledger_ = nullptr;
  std::size_t pending_entry_ = 0;
};

// A Cartesian mesh over a communicator: one sub-communicator per axis.
class mesh {
 public:
  // \note collective over base. dims must multiply to base.size().
  mesh(const comm& base, std::vector<int> dims);
  [[nodiscard]] const std::vector<int>& dims() const { return dims_; }
  [[nodiscard]] const std::vector<int>& coords() const { return coords_; }
  [[nodiscard]] comm& axis(int a) { return axes_.at(static_cast<std::size_t>(a)); }
  [[nodiscard]] comm& all() { return all_; }
  void attach(ledger* l, bool checked);
  void set_backend(backend b);
  void set_defect(collective_defect d);

 private:
  std::vector<int> dims_, coords_;
  comm all_;
  std::vector<comm> axes_;
};

}  // namespace shardcheck::par
