#pragma once
// The communicator, in layers (as mpl separates the handle from the operations):
//
//   comm_handle   owns one MPI_Comm, nothing else (WORLD and SELF are never freed)
//   collectives   the operations, as an interface over one `call` value per collective:
//                   mpi_collectives     Open MPI's built-ins
//                   native_collectives  shardcheck's ring / tree schedules (collectives/)
//                 and decorators around either, each itself a `collectives`:
//                   checked_collectives fingerprint across ranks + ledger recording, for the
//                                       blocking and the started forms and point-to-point
//                   (further decorators, e.g. fault injection, are added from outside through
//                   stack_options::wrap)
//   comm          what a kernel calls: typed spans turned into calls, sent down the stack
//   mesh          a Cartesian grid over a comm: one comm per axis
//
// Error policy: every communicator shardcheck creates or wraps uses MPI_ERRORS_RETURN, and a
// failing call throws shardcheck::mpi_error with MPI's message.
//
// Example: a case on p = 3 with backend=native and a ledger builds, for every axis,
//   comm → checked_collectives(ledger, axis) → native_collectives(handle)
// and stack_options::wrap may add layers of its own above or below the checker.
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "shardcheck/parallel/ledger.hpp"
#include "shardcheck/parallel/partition.hpp"
#include "shardcheck/parallel/pmpi.hpp"
#include "shardcheck/parallel/tags.hpp"
#include "shardcheck/reference/mixed.hpp"
#include "shardcheck/reference/types.hpp"

namespace shardcheck::par {

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
// bf16 and f16: two committed 2-byte types of their own, made on first use (after MPI_Init), so
// that sum_op can tell them apart.
template <>
MPI_Datatype mpi_type<bfloat16_t>();
template <>
MPI_Datatype mpi_type<half_t>();
[[nodiscard]] MPI_Datatype mpi_type(dtype t);
// The sum for reductions in dtype t: MPI_SUM, or for bf16 / f16 a user-defined MPI_Op that widens
// each pair to f32, adds and rounds back (one rounding per addition, as the native schedules).
[[nodiscard]] MPI_Op sum_op(dtype t);

// Owns one MPI_Comm and frees it on destruction (never WORLD, SELF or NULL). Move-only; the move
// is the default one.
class comm_handle {
 public:
  comm_handle() = default;
  // Takes ownership of c (sets MPI_ERRORS_RETURN on it).
  explicit comm_handle(MPI_Comm c);
  [[nodiscard]] static comm_handle world();
  [[nodiscard]] static comm_handle self();
  [[nodiscard]] MPI_Comm native_handle() const { return c_.get(); }
  [[nodiscard]] bool valid() const { return c_.get() != MPI_COMM_NULL; }
  [[nodiscard]] int rank() const;
  [[nodiscard]] int size() const;

 private:
  struct freer {
    void operator()(MPI_Comm c) const;
  };
  // MPI_Comm is a handle type; holder keeps MPI_COMM_NULL as its empty state.
  struct holder {
    MPI_Comm c = MPI_COMM_NULL;
    holder() = default;
    explicit holder(MPI_Comm v) : c(v) {}
    holder(holder&& o) noexcept : c(std::exchange(o.c, MPI_COMM_NULL)) {}
    holder& operator=(holder&& o) noexcept {
      if (this != &o) {
        freer{}(c);
        c = std::exchange(o.c, MPI_COMM_NULL);
      }
      return *this;
    }
    holder(const holder&) = delete;
    holder& operator=(const holder&) = delete;
    ~holder() { freer{}(c); }
    [[nodiscard]] MPI_Comm get() const { return c; }
  };
  holder c_;
};

// One collective, as a value: what the stack of layers passes down.
struct call {
  collective kind = collective::barrier;
  dtype type = dtype::f64;
  // all_gather, all_reduce, broadcast: nullptr (in place on `out`). reduce_scatter, all_to_all:
  // the input.
  const void* in = nullptr;
  void* out = nullptr;
  // Elements in this rank's result buffer `out`.
  std::int64_t count = 0;
  // all_gather, reduce_scatter: one count per rank (parts contiguous in rank order); all_to_all:
  // the send counts.
  std::span<const std::int64_t> counts;
  std::span<const std::int64_t> recv_counts;  // all_to_all
  int root = -1;                              // broadcast
  // reduce_scatter, all_to_all: elements in `in`; −1 when not stated (then not checked).
  std::int64_t in_count = -1;
  [[nodiscard]] std::size_t elem_bytes() const { return size_of(type); }
};

// A point-to-point message: `count` elements of `type` at data, to or from rank `peer`, with the
// caller's tag (0 ≤ tag < tags::p2p_limit).
struct message {
  dtype type = dtype::f64;
  void* data = nullptr;  // a send only reads it
  std::int64_t count = 0;
  int peer = 0;
  int tag = 0;
};

// Bytes a call sent and received on this rank.
struct traffic {
  std::int64_t sent = 0, received = 0;
};

// The operations of one communicator. \note every call but the point-to-point ones is collective
// over the communicator.
class collectives {
 public:
  virtual ~collectives() = default;
  [[nodiscard]] virtual int rank() const = 0;
  [[nodiscard]] virtual int size() const = 0;
  [[nodiscard]] virtual MPI_Comm native_handle() const = 0;
  // Runs c to completion.
  virtual traffic run(const call& c) = 0;
  // Starts c; at most one started call is pending per communicator. Its buffers must stay alive
  // and untouched until wait() returns.
  virtual void start(const call& c) = 0;
  // Moves the pending call on; true when it is done (or nothing is pending).
  virtual bool test() = 0;
  // Ends the pending call and returns its traffic ({} if nothing was pending).
  virtual traffic wait() = 0;
  // Posts a send; the request completes in wait_send.
  [[nodiscard]] virtual MPI_Request send(const message& m) = 0;
  virtual void wait_send(MPI_Request& r) = 0;
  // Blocks for a message; returns the elements that arrived, or m.count + 1 when the message was
  // longer than the buffer (which it fills).
  virtual std::int64_t recv(const message& m) = 0;
};

// Checks a call against its buffers (counts per rank, sizes, MPI's int range); throws
// invalid_problem naming the collective.
void validate(const call& c, int rank, int size);
// The ledger entry of call c on rank `rank` of `size`, with the bytes of t.
[[nodiscard]] ledger_entry entry_of(const call& c, int rank, int size, traffic t);
// The same with the bytes of the `mpi` formulas (the logical payload), which is what Open MPI's
// built-ins report: their algorithm is unknown.
[[nodiscard]] ledger_entry mpi_entry_of(const call& c, int rank, int size);

// Open MPI's built-ins on h (not owned).
[[nodiscard]] std::unique_ptr<collectives> make_mpi_collectives(const comm_handle& h);
// shardcheck's schedules on h (not owned).
// Runs the algorithms chosen (others by size, as algorithm_of says).
[[nodiscard]] std::unique_ptr<collectives> make_native_collectives(
    const comm_handle& h, const algorithm_choice& chosen = {});
[[nodiscard]] std::unique_ptr<collectives> make_collectives(const backend_spec& b,
                                                            const comm_handle& h);

// Compares one collective's fingerprint (sequence number, kind, element size, count, root; a
// barrier has no element size, only a broadcast a root) across the ranks of comm with one
// MPI_Allreduce, MAX of (h, −h): equal everywhere iff max h = −max(−h). Throws mpi_error
// ("collective mismatch: …") on every rank when they disagree. The checking layer and the raw-MPI
// wrappers (pmpi.hpp) both call it; on a mismatch it gathers every rank's call for the message
// (collective_mismatch_text). \note collective over comm.
void compare_fingerprint(MPI_Comm comm, std::uint64_t sequence, collective kind,
                         std::size_t elem_bytes, std::int64_t count, int root);
// The message of a mismatch at collective #sequence from every rank's call there (calls: 4 per
// rank — kind, count, root (−1: none), element bytes), the ranks making the same call grouped
// and those whose call differs from the one most ranks made named: "collective mismatch: the
// ranks of a communicator of size 3 disagree at collective #0: rank 0 all_reduce, count 2;
// ranks 1, 2 all_reduce, count 1; out of step: rank 0 (this rank: 1)".
[[nodiscard]] std::string collective_mismatch_text(const std::vector<long long>& calls,
                                                   std::uint64_t sequence, int me);

// The checking layer: before each collective compares a fingerprint (sequence number, kind,
// element size, count, root) across the ranks, so that mismatched collectives fail on every rank
// with a clear message instead of hanging; records every call and message in the attached ledger.
class checked_collectives final : public collectives {
 public:
  explicit checked_collectives(std::unique_ptr<collectives> inner) : inner_(std::move(inner)) {}
  // Attaches a ledger (not owned) recording as mesh axis `axis`; nullptr detaches. Resets the
  // sequence.
  void attach(ledger* l, int axis, bool fingerprint);
  [[nodiscard]] int rank() const override { return inner_->rank(); }
  [[nodiscard]] int size() const override { return inner_->size(); }
  [[nodiscard]] MPI_Comm native_handle() const override { return inner_->native_handle(); }
  traffic run(const call& c) override;
  void start(const call& c) override;
  bool test() override;
  traffic wait() override;
  [[nodiscard]] MPI_Request send(const message& m) override;
  void wait_send(MPI_Request& r) override { inner_->wait_send(r); }
  std::int64_t recv(const message& m) override;

 private:
  void fingerprint(const call& c);
  void record(const ledger_entry& e);
  void finish_started(traffic t);
  std::unique_ptr<collectives> inner_;
  ledger* ledger_ = nullptr;
  int axis_ = 0;
  bool fingerprint_ = false;
  std::uint64_t sequence_ = 0;
  bool pending_ = false;
  ledger* pending_ledger_ = nullptr;
  std::size_t pending_entry_ = 0;
};

// Where a decorator goes in a comm's stack: `above` the checker sees what the kernel asked for
// before the checker does (a skipped call never reaches it); `below` sits between the checker and
// the implementation (what the wire does).
enum class layer_position { above, below };
// Wraps the layer `inner` of the comm for mesh axis `axis` (−1: the whole mesh).
using layer_wrapper = std::function<std::unique_ptr<collectives>(std::unique_ptr<collectives> inner,
                                                                 layer_position where, int axis)>;

// How a mesh builds each comm's stack.
struct stack_options {
  par::backend_spec backend;  // with its algorithm choices
  layer_wrapper wrap;         // empty: no extra layers
};

// What a kernel calls. Typed spans become calls, which go down the comm's stack. Each method that
// enters the stack holds a pmpi::internal guard: shardcheck's own MPI calls are never recorded as
// the kernel's raw ones.
class comm {
 public:
  comm() = default;
  // A comm on h, whose stack is built per o (axis: the mesh axis it stands for, −1 the mesh).
  explicit comm(comm_handle h, const stack_options& o = {}, int axis = 0);
  comm(comm&&) noexcept = default;
  comm& operator=(comm&&) noexcept = default;

  [[nodiscard]] static comm world() { return comm(comm_handle::world()); }
  [[nodiscard]] int rank() const { return rank_; }
  [[nodiscard]] int size() const { return size_; }
  [[nodiscard]] bool valid() const { return handle_.valid(); }
  [[nodiscard]] MPI_Comm native_handle() const { return handle_.native_handle(); }
  [[nodiscard]] const comm_handle& handle() const { return handle_; }

  // \note collective over this comm. Ranks passing a negative colour get an invalid comm. The
  // result runs on Open MPI's built-ins, unchecked.
  [[nodiscard]] comm split(int color, int key) const;
  // Attaches a ledger (not owned) and turns fingerprinting on or off; resets the sequence.
  void attach(ledger* l, bool fingerprint);

  // \note collective over this comm. In place: rank r's part is buffer[displ_r, displ_r+counts[r]).
  template <class T>
  void all_gather(std::span<T> buffer, std::span<const std::int64_t> counts) {
    const pmpi::internal own;
    stack_->run(gather_call(buffer, counts));
  }
  // \note collective over this comm. counts[r] = parts.size(r)·scale, without allocating.
  template <class T>
  void all_gather(std::span<T> buffer, const partition& parts, std::int64_t scale) {
    all_gather<T>(buffer, scaled_counts(parts, scale));
  }
  // \note collective over this comm. In place, sum.
  template <class T>
  void all_reduce_sum(std::span<T> buffer) {
    const pmpi::internal own;
    stack_->run(reduce_call(buffer));
  }
  // \note collective over this comm. in: Σcounts elements; out: counts[rank] elements, the sum of
  // every rank's part `rank`.
  template <class T>
  void reduce_scatter_sum(std::span<const T> in, std::span<T> out,
                          std::span<const std::int64_t> counts) {
    const pmpi::internal own;
    stack_->run(scatter_call(in, out, counts));
  }
  template <class T>
  void reduce_scatter_sum(std::span<const T> in, std::span<T> out, const partition& parts,
                          std::int64_t scale) {
    reduce_scatter_sum<T>(in, out, scaled_counts(parts, scale));
  }
  // \note collective over this comm.
  template <class T>
  void broadcast(std::span<T> buffer, int root) {
    const pmpi::internal own;
    stack_->run(broadcast_call(buffer, root));
  }
  // \note collective over this comm. Parts are contiguous in rank order in both buffers.
  template <class T>
  void all_to_all(std::span<const T> in, std::span<const std::int64_t> send_counts,
                  std::span<T> out, std::span<const std::int64_t> recv_counts) {
    call c = make_call<T>(collective::all_to_all, in.data(), out.data(), out.size());
    c.counts = send_counts;
    c.recv_counts = recv_counts;
    c.in_count = static_cast<std::int64_t>(in.size());
    const pmpi::internal own;
    stack_->run(c);
  }
  // \note collective over this comm.
  void barrier() {
    const pmpi::internal own;
    stack_->run(call{});
  }

  // Non-blocking forms: start_* begins the collective and returns; at most one is pending per
  // comm. It is fingerprinted and recorded when started; its bytes are filled in when it
  // completes. Its buffers must stay alive and untouched until wait_pending() returns.
  // test_pending() moves it on and says if it is done: call it between chunks of work.
  template <class T>
  void start_all_gather(std::span<T> buffer, std::span<const std::int64_t> counts) {
    const pmpi::internal own;
    stack_->start(gather_call(buffer, counts));
  }
  template <class T>
  void start_reduce_scatter_sum(std::span<const T> in, std::span<T> out,
                                std::span<const std::int64_t> counts) {
    const pmpi::internal own;
    stack_->start(scatter_call(in, out, counts));
  }
  template <class T>
  void start_all_reduce_sum(std::span<T> buffer) {
    const pmpi::internal own;
    stack_->start(reduce_call(buffer));
  }
  template <class T>
  void start_broadcast(std::span<T> buffer, int root) {
    const pmpi::internal own;
    stack_->start(broadcast_call(buffer, root));
  }
  bool test_pending() {
    const pmpi::internal own;
    return stack_->test();
  }
  void wait_pending() {
    const pmpi::internal own;
    (void)stack_->wait();
  }

  // Point-to-point (a pipeline's activations and gradients), ledgered as send / recv entries with
  // the peer; 0 ≤ tag < max_p2p_tag. A send is non-blocking: its buffer must stay alive and
  // untouched until wait_send(request). A receive blocks and returns how many elements arrived; a
  // message longer than the buffer fills it and returns buffer.size() + 1.
  static constexpr int max_p2p_tag = tags::p2p_limit;
  template <class T>
  [[nodiscard]] MPI_Request start_send(std::span<const T> data, int peer, int tag) {
    const pmpi::internal own;
    return stack_->send(message{dtype_of<T>(), const_cast<T*>(data.data()),
                                static_cast<std::int64_t>(data.size()), peer, tag});
  }
  void wait_send(MPI_Request& request) {
    const pmpi::internal own;
    stack_->wait_send(request);
  }
  template <class T>
  std::int64_t recv(std::span<T> data, int peer, int tag) {
    const pmpi::internal own;
    return stack_->recv(
        message{dtype_of<T>(), data.data(), static_cast<std::int64_t>(data.size()), peer, tag});
  }

  // counts[r] = |[lo, hi) ∩ part r|·scale: each rank's share of a window of a partitioned
  // dimension. In the comm's scratch (no allocation), valid until the next call.
  [[nodiscard]] std::span<const std::int64_t> window_counts(const partition& parts, std::int64_t lo,
                                                            std::int64_t hi, std::int64_t scale);
  // counts[r] = parts.size(r)·scale, in the same scratch.
  [[nodiscard]] std::span<const std::int64_t> scaled_counts(const partition& parts,
                                                            std::int64_t scale);

 private:
  template <class T>
  static call make_call(collective kind, const void* in, void* out, std::size_t count) {
    call c;
    c.kind = kind;
    c.type = dtype_of<T>();
    c.in = in;
    c.out = out;
    c.count = static_cast<std::int64_t>(count);
    return c;
  }
  template <class T>
  static call broadcast_call(std::span<T> buffer, int root) {
    call c = make_call<T>(collective::broadcast, nullptr, buffer.data(), buffer.size());
    c.root = root;
    return c;
  }
  template <class T>
  static call gather_call(std::span<T> buffer, std::span<const std::int64_t> counts) {
    call c = make_call<T>(collective::all_gather, nullptr, buffer.data(), buffer.size());
    c.counts = counts;
    return c;
  }
  template <class T>
  static call reduce_call(std::span<T> buffer) {
    return make_call<T>(collective::all_reduce, nullptr, buffer.data(), buffer.size());
  }
  template <class T>
  static call scatter_call(std::span<const T> in, std::span<T> out,
                           std::span<const std::int64_t> counts) {
    call c = make_call<T>(collective::reduce_scatter, in.data(), out.data(), out.size());
    c.counts = counts;
    c.in_count = static_cast<std::int64_t>(in.size());
    return c;
  }
  comm_handle handle_;
  int rank_ = 0, size_ = 0;
  int axis_ = 0;  // the mesh axis its ledger entries record
  std::unique_ptr<collectives> stack_;
  checked_collectives* checker_ = nullptr;  // inside stack_
  std::vector<std::int64_t> counts_;        // window_counts / scaled_counts scratch
};

// A Cartesian mesh over a communicator: one comm per axis, and one over the whole mesh.
class mesh {
 public:
  // \note collective over base. dims must multiply to base.size().
  mesh(const comm& base, std::vector<int> dims, const stack_options& o = {});
  [[nodiscard]] const std::vector<int>& dims() const { return dims_; }
  [[nodiscard]] const std::vector<int>& coords() const { return coords_; }
  [[nodiscard]] comm& axis(int a) { return axes_.at(static_cast<std::size_t>(a)); }
  [[nodiscard]] comm& all() { return all_; }
  // Attaches l to every comm (the whole mesh's as axis −1) and resets their sequences.
  void attach(ledger* l, bool fingerprint);

 private:
  std::vector<int> dims_, coords_;
  comm all_;
  std::vector<comm> axes_;
};

}  // namespace shardcheck::par
