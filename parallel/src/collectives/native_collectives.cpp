#include <cstddef>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "collectives/native.hpp"
#include "shardcheck/parallel/comm.hpp"
#include "shardcheck/parallel/memory.hpp"

namespace shardcheck::par {

namespace {

// Each communicator's reduction segments, for its blocking and its started collectives.
constexpr std::size_t scratch_bytes = std::size_t{1} << 20;

// f(std::type_identity<T>{}) with T the element type of t.
template <class F>
decltype(auto) typed(dtype t, F&& f) {
  switch (t) {
    case dtype::f32: return f(std::type_identity<float>{});
    case dtype::bf16: return f(std::type_identity<bfloat16_t>{});
    case dtype::f16: return f(std::type_identity<half_t>{});
    case dtype::f64: break;
  }
  return f(std::type_identity<double>{});
}

traffic counted(const native::channel& ch) { return {ch.sent, ch.received}; }

// shardcheck's schedules (collectives/*.cpp); the traffic is what the channel counted, message
// by message. The started call has its own counts and reduction scratch (a blocking call may run
// while it is pending).
class native_collectives final : public collectives {
 public:
  native_collectives(const comm_handle& h, const algorithm_choice& chosen)
      : c_(h.native_handle()), rank_(h.rank()), size_(h.size()), chosen_(chosen) {
    const auto p = static_cast<std::size_t>(size_);
    for (auto* v : {&counts_a_, &displs_a_, &counts_b_, &displs_b_, &counts_nb_, &displs_nb_})
      v->resize(p);
    // Left uninitialised: a collective writes its segments before reading them, and a page no
    // collective touches costs nothing (comms are made per case, several per mesh).
    scratch_.reset(new std::byte[scratch_bytes]);
    scratch_nb_.reset(new std::byte[scratch_bytes]);
  }
  [[nodiscard]] int rank() const override { return rank_; }
  [[nodiscard]] int size() const override { return size_; }
  [[nodiscard]] MPI_Comm native_handle() const override { return c_; }

  traffic run(const call& c) override {
    validate(c, rank_, size_);
    switch (c.kind) {
      case collective::all_gather:
      case collective::all_reduce:
      case collective::reduce_scatter:
      case collective::broadcast: {
        native::schedule s = schedule_of(c, false);
        s.wait();
        return counted(s.counted());
      }
      case collective::all_to_all:
        native::to_ints(c.counts, counts_a_, displs_a_);
        native::to_ints(c.recv_counts, counts_b_, displs_b_);
        return typed(c.type, [&]<class T>(std::type_identity<T>) {
          native::channel ch = channel(false);
          native::all_to_all<T>(ch, static_cast<const T*>(c.in), counts_a_, displs_a_,
                                static_cast<T*>(c.out), counts_b_, displs_b_);
          return counted(ch);
        });
      case collective::barrier: {
        const mem::mpi_heap in_mpi;  // what MPI allocates is its own, not the kernel's
        check_mpi(MPI_Barrier(c_), "MPI_Barrier");
        return {};
      }
      default: return {};  // validate() rejected it
    }
  }

  void start(const call& c) override {
    validate(c, rank_, size_);
    if (started_ && !pending_.done())
      throw invalid_problem("start_" + std::string(to_string(c.kind)) +
                            ": a non-blocking collective is already pending on this comm");
    if (c.kind != collective::all_gather && c.kind != collective::all_reduce &&
        c.kind != collective::reduce_scatter && c.kind != collective::broadcast)
      throw invalid_problem("start_" + std::string(to_string(c.kind)) + ": no non-blocking form");
    pending_ = schedule_of(c, true);
    started_ = true;
    (void)test();
  }

  bool test() override { return !started_ || pending_.test(); }

  traffic wait() override {
    if (!started_) return {};
    pending_.wait();
    started_ = false;
    return counted(pending_.counted());
  }

  [[nodiscard]] MPI_Request send(const message& m) override {
    return native::send_message(c_, size_, m);
  }
  void wait_send(MPI_Request& r) override { native::wait_message(r); }
  std::int64_t recv(const message& m) override { return native::recv_message(c_, size_, m); }

 private:
  [[nodiscard]] native::channel channel(bool started) {
    std::byte* scratch = (started ? scratch_nb_ : scratch_).get();
    return native::channel{c_, rank_, size_, {scratch, scratch_bytes}, started, 0, 0, chosen_};
  }

  // The schedule of a collective (all but all-to-all and the barrier), on the blocking or the
  // started scratch.
  native::schedule schedule_of(const call& c, bool started) {
    std::vector<int>& counts = started ? counts_nb_ : counts_a_;
    std::vector<int>& displs = started ? displs_nb_ : displs_a_;
    return typed(c.type, [&]<class T>(std::type_identity<T>) {
      T* const out = static_cast<T*>(c.out);
      switch (c.kind) {
        case collective::all_gather:
          native::to_ints(c.counts, counts, displs);
          return native::all_gather<T>(channel(started), out, counts, displs);
        case collective::reduce_scatter:
          native::to_ints(c.counts, counts, displs);
          return native::reduce_scatter<T>(channel(started), static_cast<const T*>(c.in), out,
                                           counts, displs);
        case collective::broadcast:
          return native::broadcast<T>(channel(started), {out, static_cast<std::size_t>(c.count)},
                                      c.root);
        default:
          return native::all_reduce<T>(channel(started), {out, static_cast<std::size_t>(c.count)},
                                       counts, displs);
      }
    });
  }

  MPI_Comm c_;
  int rank_, size_;
  algorithm_choice chosen_;
  std::vector<int> counts_a_, displs_a_, counts_b_, displs_b_, counts_nb_, displs_nb_;
  std::unique_ptr<std::byte[]> scratch_, scratch_nb_;
  // The started call, until wait() returns its traffic.
  native::schedule pending_;
  bool started_ = false;
};

}  // namespace

std::unique_ptr<collectives> make_native_collectives(const comm_handle& h,
                                                     const algorithm_choice& chosen) {
  return std::make_unique<native_collectives>(h, chosen);
}

}  // namespace shardcheck::par
