#pragma once
// shardcheck's own collectives, on MPI point-to-point messages (the `native` backend). One file per
// family; comm (mpi.cpp) dispatches to them and records the bytes they count.
//
//   all-gather(v)      ring: p − 1 steps; at step s rank r passes chunk r − s to r + 1
//   reduce-scatter(v)  ring: p − 1 steps; chunk j starts at rank j + 1 and collects one addend per
//                      hop, ending complete at rank j ((x_{j+1} + x_{j+2}) + …) + x_j
//   all-reduce         ring reduce-scatter over balanced chunks, then ring all-gather; recursive
//                      doubling (partners add lower rank's data first) for ≤ 1024 elements
//   broadcast          binomial tree; a pipelined chain of segments above 16384 elements
//   all-to-all(v)      pairwise: at step s rank r sends to r + s and receives from r − s
//
// Example: ring all-reduce of 10 elements on p = 3, chunks 4,3,3 at offsets 0,4,7. Step 0: rank 0
// sends chunk 2 to rank 1 and receives chunk 1 from rank 2; step 1: sends its partial of chunk 1,
// receives chunk 0's partial, adds its own: rank 0 holds chunk 0 complete. Two all-gather steps
// then hand every complete chunk round the ring.
//
// Reductions stream through a scratch buffer the communicator owns (never allocated here), in
// segments of at most scratch/(2·sizeof(T)) elements, so large buffers need no temporary copy.
#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

#include "shardcheck/parallel/mpi.hpp"

namespace shardcheck::par::native {

// What one call runs on, and the bytes it moved (incremented message by message).
struct channel {
  MPI_Comm c = MPI_COMM_NULL;
  int rank = 0, size = 1;
  std::span<std::byte> scratch;
  collective_defect defect = collective_defect::none;
  std::int64_t sent = 0, received = 0;  // bytes

  // Send n to `to` and receive m from `from` at once.
  void exchange(const void* out, std::int64_t n, int to, void* in, std::int64_t m, int from,
                MPI_Datatype t, std::size_t elem_bytes, int tag);
  void send(const void* out, std::int64_t n, int to, MPI_Datatype t, std::size_t elem_bytes,
            int tag);
  void recv(void* in, std::int64_t m, int from, MPI_Datatype t, std::size_t elem_bytes, int tag);
  template <class T>
  [[nodiscard]] std::int64_t segment() const {
    return static_cast<std::int64_t>(scratch.size() / (2 * sizeof(T)));
  }
};

[[nodiscard]] inline int mod(int a, int p) { return ((a % p) + p) % p; }

// \note collective over ch.c. buffer holds chunk k at displs[k], counts[k] elements.
template <class T>
void all_gather(channel& ch, T* buffer, std::span<const int> counts, std::span<const int> displs);
// \note collective over ch.c. out gets counts[rank] elements: the sum of every rank's chunk rank.
template <class T>
void reduce_scatter(channel& ch, const T* in, T* out, std::span<const int> counts,
                    std::span<const int> displs);
// \note collective over ch.c. In place, sum.
template <class T>
void all_reduce(channel& ch, std::span<T> buffer);
// \note collective over ch.c.
template <class T>
void broadcast(channel& ch, std::span<T> buffer, int root);
// \note collective over ch.c.
template <class T>
void all_to_all(channel& ch, const T* in, std::span<const int> send_counts,
                std::span<const int> send_displs, T* out, std::span<const int> recv_counts,
                std::span<const int> recv_displs);

// The two ring halves over chunks given by chunk(k) → {offset, size}, shared by all-reduce.
// \note collective over ch.c.
template <class T, class Chunk>
void ring_all_gather(channel& ch, T* buffer, Chunk chunk) {
  const int p = ch.size, r = ch.rank;
  const int steps = ch.defect == collective_defect::ring_short_by_one ? p - 2 : p - 1;
  for (int s = 0; s < steps; ++s) {
    const auto [so, sn] = chunk(mod(r - s, p));
    const auto [ro, rn] = chunk(mod(r - s - 1, p));
    ch.exchange(buffer + so, sn, mod(r + 1, p), buffer + ro, rn, mod(r - 1, p), mpi_type<T>(),
                sizeof(T), 11);
  }
}

// out (which may alias in + chunk(rank).offset) receives the sum of chunk `rank`. max_size is the
// largest chunk.
// \note collective over ch.c.
template <class T, class Chunk>
void ring_reduce_scatter(channel& ch, const T* in, T* out, Chunk chunk, std::int64_t max_size) {
  const int p = ch.size, r = ch.rank;
  const std::int64_t seg = ch.segment<T>();
  T* const a = reinterpret_cast<T*>(ch.scratch.data());
  T* const b = a + seg;
  const auto part = [&](std::int64_t len, std::int64_t g0) {
    return std::clamp<std::int64_t>(len - g0, 0, seg);
  };
  for (std::int64_t g0 = 0; g0 < max_size; g0 += seg) {
    T* cur = a;
    T* next = b;
    for (int s = 0; s + 1 < p; ++s) {
      const auto [so, sl] = chunk(mod(r - s - 1, p));
      const auto [ro, rl] = chunk(mod(r - s - 2, p));
      const std::int64_t sn = part(sl, g0), rn = part(rl, g0);
      const T* out_seg = s == 0 ? (sn > 0 ? in + so + g0 : in) : cur;
      ch.exchange(out_seg, sn, mod(r + 1, p), next, rn, mod(r - 1, p), mpi_type<T>(), sizeof(T),
                  12);
      T* dest = s + 2 == p ? out + g0 : next;
      const T* own = in + ro + g0;
      for (std::int64_t i = 0; i < rn; ++i) dest[i] = next[i] + own[i];
      std::swap(cur, next);
    }
  }
}

}  // namespace shardcheck::par::native
