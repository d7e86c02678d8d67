#include "collectives/native.hpp"

namespace shardcheck::par::native {

// Recursive doubling (small buffers). q = the largest power of two ≤ p; ranks q..p−1 first fold
// into rank − q and get the result back at the end. Partners add the lower rank's data first, so
// both hold the same bits. Example p = 3: rank 2 folds into rank 0 (x0 + x2), then ranks 0 and 1
// exchange: (x0 + x2) + x1 on both, and rank 0 hands it to rank 2.
// Ring (the rest): reduce-scatter over balanced chunks, each rank's complete chunk left in place,
// then the all-gather of those chunks. Tree (chosen): see schedule::tree.
template <class T>
schedule all_reduce(channel ch, std::span<T> buffer, std::span<int> counts, std::span<int> displs) {
  const int p = ch.size;
  const auto n = static_cast<std::int64_t>(buffer.size());
  if (p == 1) return {};
  const algorithm a = ch.algorithm_for(collective::all_reduce, n);
  if (a == algorithm::recursive_doubling) return schedule::recursive_doubling<T>(ch, buffer);
  if (a == algorithm::tree) return schedule::tree<T>(ch, buffer);
  for (int k = 0; k < p; ++k) {
    const auto [offset, size] = balanced_chunk(n, p, k);
    displs[static_cast<std::size_t>(k)] = static_cast<int>(offset);
    counts[static_cast<std::size_t>(k)] = static_cast<int>(size);
  }
  T* const data = buffer.data();
  return schedule::ring<T>(ch, data, data + displs[static_cast<std::size_t>(ch.rank)], true, data,
                           true, counts, displs);
}

template schedule all_reduce<float>(channel, std::span<float>, std::span<int>, std::span<int>);
template schedule all_reduce<double>(channel, std::span<double>, std::span<int>, std::span<int>);
template schedule all_reduce<bfloat16_t>(channel, std::span<bfloat16_t>, std::span<int>,
                                         std::span<int>);
template schedule all_reduce<half_t>(channel, std::span<half_t>, std::span<int>, std::span<int>);

}  // namespace shardcheck::par::native
