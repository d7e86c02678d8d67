#pragma once
// shardcheck's own collectives, on MPI point-to-point messages (the `native` backend). One file per
// family; native_collectives (native_collectives.cpp) dispatches to them and reports the bytes
// they count.
//
//   all-gather(v)      ring: p − 1 steps; at step s rank r passes chunk r − s to r + 1
//   reduce-scatter(v)  ring: p − 1 steps; chunk j starts at rank j + 1 and collects one addend per
//                      hop, ending complete at rank j ((x_{j+1} + x_{j+2}) + …) + x_j
//   all-reduce         ring reduce-scatter over balanced chunks, then ring all-gather; recursive
//                      doubling (partners add lower rank's data first) for ≤ 1024 elements;
//                      chosen (backend=native:all_reduce=tree): a binomial-tree reduce to rank 0
//                      (each rank adds its children's partial sums, lowest child first) and a
//                      binomial broadcast back, segment by segment
//   broadcast          binomial tree (one message at p = 2); a pipelined chain of segments
//                      above 16384 elements on p > 2 (chosen: backend=native:broadcast=chain)
//   all-to-all(v)      pairwise: at step s rank r sends to r + s and receives from r − s
//
// Example: ring all-reduce of 10 elements on p = 3, chunks 4,3,3 at offsets 0,4,7. Step 0: rank 0
// sends chunk 2 to rank 1 and receives chunk 1 from rank 2; step 1: sends its partial of chunk 1,
// receives chunk 0's partial, adds its own: rank 0 holds chunk 0 complete. Two all-gather steps
// then hand every complete chunk round the ring.
//
// All-gather, reduce-scatter, all-reduce and broadcast run as a `schedule`: a state machine over
// steps, each step at most one send and one receive (MPI_Isend/MPI_Irecv, posted together)
// followed by the local additions on what arrived. test() finishes every step whose messages
// have arrived and posts the next, so a rank that calls it between chunks of work moves the
// collective on while it computes; wait() drives it to the end. The blocking forms are a schedule
// waited at once, so both forms send the same messages and count the same bytes.
//
// Reductions stream through a scratch buffer the communicator owns (never allocated here), in
// segments of at most scratch/(2·sizeof(T)) elements, so large buffers need no temporary copy.
#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

#include "shardcheck/parallel/comm.hpp"

namespace shardcheck::par::native {

// What one call runs on, and the bytes it moved (incremented message by message).
struct channel {
  MPI_Comm c = MPI_COMM_NULL;
  int rank = 0, size = 1;
  std::span<std::byte> scratch;
  // A started collective: its tags are offset by tags::started_offset (a blocking collective may
  // run on the same communicator meanwhile).
  bool started = false;
  std::int64_t sent = 0, received = 0;  // bytes
  algorithm_choice chosen;              // the case's choices (algorithm_of)
  [[nodiscard]] algorithm algorithm_for(collective kind, std::int64_t count) const {
    return algorithm_of(backend_spec(backend::native, chosen), kind, size, count);
  }

  // Send n to `to` and receive m from `from` at once.
  void exchange(const void* out, std::int64_t n, int to, void* in, std::int64_t m, int from,
                MPI_Datatype t, std::size_t elem_bytes, int tag);
  // Posts a receive (m > 0 or from ≥ 0) and a send (to ≥ 0) without waiting; a side not posted
  // leaves MPI_REQUEST_NULL in its slot: reqs[0] the receive, reqs[1] the send.
  void post(const void* out, std::int64_t n, int to, void* in, std::int64_t m, int from,
            MPI_Datatype t, std::size_t elem_bytes, int tag, MPI_Request (&reqs)[2]);
  template <class T>
  [[nodiscard]] std::int64_t segment() const {
    return static_cast<std::int64_t>(scratch.size() / (2 * sizeof(T)));
  }
};

[[nodiscard]] inline int mod(int a, int p) { return ((a % p) + p) % p; }

// A native collective in flight (see above). Default-constructed: nothing to do.
class schedule {
 public:
  schedule() = default;
  // Ring reduce-scatter (when `reduce`) and/or ring all-gather over chunk k = [displs[k],
  // displs[k] + counts[k]). The reduce-scatter reads `in` and leaves the sum of chunk `rank` in
  // `out` (which may alias in + displs[rank]); the all-gather works in place on `data`. counts and
  // displs must outlive the schedule.
  template <class T>
  static schedule ring(channel ch, const T* in, T* out, bool reduce, T* data, bool gather,
                       std::span<const int> counts, std::span<const int> displs);
  // Recursive doubling all-reduce of `buffer` (at most ch.segment<T>() elements), in place.
  template <class T>
  static schedule recursive_doubling(channel ch, std::span<T> buffer);
  // Tree all-reduce of `buffer`, in place, in segments of ch.segment<T>() elements. Per segment,
  // rank r (children c_0 < c_1 < … in the binomial tree rooted at 0, parent u unless r = 0):
  // receive each child's partial sum and add it (own first), send the sum to u, receive the
  // total from u, send it to each child, the last child first. Example p = 4: 1 → 0, 3 → 2,
  // 2 → 0 (0 holds ((x0 + x1) + (x2 + x3))), then 0 → 2, 0 → 1, 2 → 3.
  template <class T>
  static schedule tree(channel ch, std::span<T> buffer);
  // Broadcast of `buffer` from `root`, in place. Binomial: rank vr = rank − root receives the
  // whole buffer from vr less its lowest set bit, then sends it to its children, the farthest
  // first (p = 5, root 0: 0→4, 0→2, 0→1, 2→3). Chain (`chain`): root → root+1 → … in segments of
  // ch.segment<T>() elements; step t sends segment t − 1 on and receives segment t, so every link
  // is busy at once (p = 3, 3 segments: rank 1 receives s0; then s1 while it sends s0 to rank 2;
  // then s2 while it sends s1; then sends s2). Nothing moves when the buffer is empty.
  template <class T>
  static schedule broadcast(channel ch, std::span<T> buffer, int root, bool chain);

  // Finishes the steps whose messages have arrived and posts the next; true when all are done.
  bool test();
  void wait();
  [[nodiscard]] bool done() const { return next_ >= steps_; }
  // The channel with the bytes counted so far.
  [[nodiscard]] const channel& counted() const { return ch_; }

 private:
  enum class kind { none, ring, recursive_doubling, tree, binomial, chain };
  struct step {
    const std::byte* send = nullptr;
    std::int64_t send_n = 0;
    int to = -1;
    std::byte* recv = nullptr;
    std::int64_t recv_n = 0;
    int from = -1;
    int tag = 0;
  };
  using add_fn = void (*)(std::byte* dest, const std::byte* a, const std::byte* b, std::int64_t n);

  // A schedule of kind k on elements of type T, with nothing else set.
  template <class T>
  static schedule typed(channel ch, kind k);

  [[nodiscard]] std::byte* at(std::byte* p, std::int64_t elems) const {
    return p + elems * static_cast<std::int64_t>(elem_);
  }
  [[nodiscard]] const std::byte* at(const std::byte* p, std::int64_t elems) const {
    return p + elems * static_cast<std::int64_t>(elem_);
  }
  [[nodiscard]] std::pair<std::int64_t, std::int64_t> chunk(int k) const;
  // Step t, and what follows it once its messages completed.
  [[nodiscard]] step describe(int t) const;
  void finish(int t);
  void post(int t);

  channel ch_;
  kind kind_ = kind::none;
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
  std::size_t elem_ = 0;
  add_fn add_ = nullptr;
  const std::byte* in_ = nullptr;
  std::byte* out_ = nullptr;
  std::byte* data_ = nullptr;
  std::span<const int> counts_, displs_;
  std::int64_t seg_ = 0, n_ = 0;  // reduce-scatter, tree or chain segment; the count of recursive
                                  // doubling, a tree, a broadcast
  int children_ = 0, per_segment_ = 0;  // tree, binomial: children; tree: steps per segment
  int root_ = 0;                        // binomial, chain
  int reduce_steps_ = 0;                // segments · (p − 1); the gather steps follow them
  int steps_ = 0, next_ = 0;            // the algorithm's steps; the next one to post
  bool posted_ = false;
  MPI_Request reqs_[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
};

// \note collective over ch.c. buffer holds chunk k at displs[k], counts[k] elements.
template <class T>
schedule all_gather(channel ch, T* buffer, std::span<const int> counts,
                    std::span<const int> displs);
// \note collective over ch.c. out gets counts[rank] elements: the sum of every rank's chunk rank.
template <class T>
schedule reduce_scatter(channel ch, const T* in, T* out, std::span<const int> counts,
                        std::span<const int> displs);
// \note collective over ch.c. In place, sum. counts and displs (p entries, the communicator's
// scratch) receive the balanced chunks the ring runs over.
template <class T>
schedule all_reduce(channel ch, std::span<T> buffer, std::span<int> counts, std::span<int> displs);
// \note collective over ch.c. In place from root, binomial or chain (channel::algorithm_for).
template <class T>
schedule broadcast(channel ch, std::span<T> buffer, int root);
// \note collective over ch.c.
template <class T>
void all_to_all(channel& ch, const T* in, std::span<const int> send_counts,
                std::span<const int> send_displs, T* out, std::span<const int> recv_counts,
                std::span<const int> recv_displs);

// counts as MPI's ints, and their displacements (parts contiguous in rank order), in c and d (at
// least counts.size() entries each). The counts must have passed validate().
inline void to_ints(std::span<const std::int64_t> counts, std::span<int> c, std::span<int> d) {
  std::int64_t off = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    c[r] = static_cast<int>(counts[r]);
    d[r] = static_cast<int>(off);
    off += counts[r];
  }
}

// Point-to-point messages, the same on both backends (mpi_collectives.cpp). check_message throws
// invalid_problem naming `what` on a peer outside [0, size), a tag outside [0, tags::p2p_limit)
// or a count beyond MPI's int.
void check_message(const message& m, int size, const char* what);
// MPI_Isend with tag tags::p2p_base + m.tag.
[[nodiscard]] MPI_Request send_message(MPI_Comm c, int size, const message& m);
void wait_message(MPI_Request& r);
// MPI_Recv; m.count + 1 when the message was longer than the buffer.
std::int64_t recv_message(MPI_Comm c, int size, const message& m);

}  // namespace shardcheck::par::native
