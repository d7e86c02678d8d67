#include <climits>
#include <string>
#include <vector>

#include "collectives/native.hpp"
#include "shardcheck/parallel/comm.hpp"
#include "shardcheck/parallel/memory.hpp"

namespace shardcheck::par {

namespace native {

void check_message(const message& m, int size, const char* what) {
  if (m.peer < 0 || m.peer >= size || m.tag < 0 || m.tag >= tags::p2p_limit || m.count < 0 ||
      m.count > INT_MAX)
    throw invalid_problem(std::string(what) + ": peer " + std::to_string(m.peer) + ", tag " +
                          std::to_string(m.tag) + " or count " + std::to_string(m.count) +
                          " out of range");
}

MPI_Request send_message(MPI_Comm c, int size, const message& m) {
  check_message(m, size, "send");
  const mem::mpi_heap in_mpi;  // what MPI allocates is its own, not the kernel's
  MPI_Request r = MPI_REQUEST_NULL;
  check_mpi(MPI_Isend(m.data, static_cast<int>(m.count), mpi_type(m.type), m.peer,
                      tags::p2p_base + m.tag, c, &r),
            "MPI_Isend");
  return r;
}

void wait_message(MPI_Request& r) {
  const mem::mpi_heap in_mpi;
  check_mpi(MPI_Wait(&r, MPI_STATUS_IGNORE), "MPI_Wait (send)");
}

std::int64_t recv_message(MPI_Comm c, int size, const message& m) {
  check_message(m, size, "recv");
  const mem::mpi_heap in_mpi;
  MPI_Status st;
  const int rc = MPI_Recv(m.data, static_cast<int>(m.count), mpi_type(m.type), m.peer,
                          tags::p2p_base + m.tag, c, &st);
  if (rc != MPI_SUCCESS) {
    int cls = 0;
    MPI_Error_class(rc, &cls);
    if (cls == MPI_ERR_TRUNCATE) return m.count + 1;
    check_mpi(rc, "MPI_Recv");
  }
  int got = 0;
  check_mpi(MPI_Get_count(&st, mpi_type(m.type), &got), "MPI_Get_count");
  return got;
}

}  // namespace native

namespace {

// The bytes of the `mpi` formulas of ledger.hpp: Open MPI's algorithm is unknown, so its traffic
// is the logical payload.
traffic payload(const call& c, int rank, int size) {
  const ledger_entry e = mpi_entry_of(c, rank, size);
  return {e.bytes_sent, e.bytes_received};
}

// Open MPI's built-ins. Every count and displacement goes through int scratch sized at
// construction, so that no call allocates; the started call has its own (a blocking call may run
// while it is pending, and MPI reads the counts until it completes).
class mpi_collectives final : public collectives {
 public:
  explicit mpi_collectives(const comm_handle& h)
      : c_(h.native_handle()), rank_(h.rank()), size_(h.size()) {
    const auto p = static_cast<std::size_t>(size_);
    for (auto* v : {&counts_a_, &displs_a_, &counts_b_, &displs_b_, &counts_nb_, &displs_nb_})
      v->resize(p);
  }
  [[nodiscard]] int rank() const override { return rank_; }
  [[nodiscard]] int size() const override { return size_; }
  [[nodiscard]] MPI_Comm native_handle() const override { return c_; }

  traffic run(const call& c) override {
    validate(c, rank_, size_);
    const mem::mpi_heap in_mpi;
    const MPI_Datatype t = mpi_type(c.type);
    const int n = static_cast<int>(c.count);
    switch (c.kind) {
      case collective::all_gather:
        native::to_ints(c.counts, counts_a_, displs_a_);
        check_mpi(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, c.out, counts_a_.data(),
                                 displs_a_.data(), t, c_),
                  "MPI_Allgatherv");
        break;
      case collective::all_reduce:
        check_mpi(MPI_Allreduce(MPI_IN_PLACE, c.out, n, t, sum_op(c.type), c_), "MPI_Allreduce");
        break;
      case collective::reduce_scatter:
        native::to_ints(c.counts, counts_a_, displs_a_);
        check_mpi(MPI_Reduce_scatter(c.in, c.out, counts_a_.data(), t, sum_op(c.type), c_),
                  "MPI_Reduce_scatter");
        break;
      case collective::broadcast: check_mpi(MPI_Bcast(c.out, n, t, c.root, c_), "MPI_Bcast"); break;
      case collective::all_to_all:
        native::to_ints(c.counts, counts_a_, displs_a_);
        native::to_ints(c.recv_counts, counts_b_, displs_b_);
        check_mpi(MPI_Alltoallv(c.in, counts_a_.data(), displs_a_.data(), t, c.out,
                                counts_b_.data(), displs_b_.data(), t, c_),
                  "MPI_Alltoallv");
        break;
      case collective::barrier: check_mpi(MPI_Barrier(c_), "MPI_Barrier"); break;
      default: break;  // validate() rejected it
    }
    return payload(c, rank_, size_);
  }

  void start(const call& c) override {
    validate(c, rank_, size_);
    if (request_ != MPI_REQUEST_NULL)
      throw invalid_problem("start_" + std::string(to_string(c.kind)) +
                            ": a non-blocking collective is already pending on this comm");
    const mem::mpi_heap in_mpi;
    const MPI_Datatype t = mpi_type(c.type);
    switch (c.kind) {
      case collective::all_gather:
        native::to_ints(c.counts, counts_nb_, displs_nb_);
        check_mpi(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, c.out, counts_nb_.data(),
                                  displs_nb_.data(), t, c_, &request_),
                  "MPI_Iallgatherv");
        break;
      case collective::reduce_scatter:
        native::to_ints(c.counts, counts_nb_, displs_nb_);
        check_mpi(
            MPI_Ireduce_scatter(c.in, c.out, counts_nb_.data(), t, sum_op(c.type), c_, &request_),
            "MPI_Ireduce_scatter");
        break;
      case collective::all_reduce:
        check_mpi(MPI_Iallreduce(MPI_IN_PLACE, c.out, static_cast<int>(c.count), t, sum_op(c.type),
                                 c_, &request_),
                  "MPI_Iallreduce");
        break;
      case collective::broadcast:
        check_mpi(MPI_Ibcast(c.out, static_cast<int>(c.count), t, c.root, c_, &request_),
                  "MPI_Ibcast");
        break;
      default:
        throw invalid_problem("start_" + std::string(to_string(c.kind)) + ": no non-blocking form");
    }
    started_ = true;
    started_traffic_ = payload(c, rank_, size_);
    (void)test();
  }

  bool test() override {
    if (request_ == MPI_REQUEST_NULL) return true;
    int done = 0;
    const mem::mpi_heap in_mpi;
    check_mpi(MPI_Test(&request_, &done, MPI_STATUS_IGNORE), "MPI_Test");
    return done != 0;
  }

  traffic wait() override {
    if (!started_) return {};
    const mem::mpi_heap in_mpi;
    check_mpi(MPI_Wait(&request_, MPI_STATUS_IGNORE), "MPI_Wait");
    started_ = false;
    return started_traffic_;
  }

  [[nodiscard]] MPI_Request send(const message& m) override {
    return native::send_message(c_, size_, m);
  }
  void wait_send(MPI_Request& r) override { native::wait_message(r); }
  std::int64_t recv(const message& m) override { return native::recv_message(c_, size_, m); }

 private:
  MPI_Comm c_;
  int rank_, size_;
  std::vector<int> counts_a_, displs_a_, counts_b_, displs_b_, counts_nb_, displs_nb_;
  // The started call: its request (MPI_REQUEST_NULL once complete) and its traffic, until wait().
  MPI_Request request_ = MPI_REQUEST_NULL;
  bool started_ = false;
  traffic started_traffic_;
};

}  // namespace

std::unique_ptr<collectives> make_mpi_collectives(const comm_handle& h) {
  return std::make_unique<mpi_collectives>(h);
}

}  // namespace shardcheck::par
