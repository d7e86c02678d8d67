#include "collectives/native.hpp"

#include <algorithm>
#include <numeric>

namespace shardcheck::par::native {

template <class T>
schedule reduce_scatter(channel ch, const T* in, T* out, std::span<const int> counts,
                        std::span<int> displs) {
  const auto me = static_cast<std::size_t>(ch.rank);
  if (ch.size == 1) {
    std::copy_n(in + displs[me], counts[me], out);
    return {};
  }
  if (ch.defect == collective_defect::reduce_scatter_even_counts) {
    // Chunk k read where an even split would place it, clamped inside the buffer.
    const std::int64_t total = std::accumulate(counts.begin(), counts.end(), std::int64_t{0});
    const std::int64_t even = total / ch.size;
    for (std::size_t k = 0; k < counts.size(); ++k)
      displs[k] = static_cast<int>(
          std::min(static_cast<std::int64_t>(k) * even, total - counts[k]));
  }
  return schedule::ring<T>(ch, in, out, true, nullptr, false, counts, displs);
}

template schedule reduce_scatter<float>(channel, const float*, float*, std::span<const int>,
                                        std::span<int>);
template schedule reduce_scatter<double>(channel, const double*, double*, std::span<const int>,
                                         std::span<int>);

}  // namespace shardcheck::par::native
