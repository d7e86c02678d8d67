#include "collectives/native.hpp"

#include <algorithm>

namespace shardcheck::par::native {

template <class T>
void reduce_scatter(channel& ch, const T* in, T* out, std::span<const int> counts,
                    std::span<const int> displs) {
  const auto me = static_cast<std::size_t>(ch.rank);
  if (ch.size == 1) {
    std::copy_n(in + displs[me], counts[me], out);
    return;
  }
  std::int64_t total = 0, largest = 0;
  for (int n : counts) {
    total += n;
    largest = std::max<std::int64_t>(largest, n);
  }
  const bool even_only = ch.defect == collective_defect::reduce_scatter_even_counts;
  const std::int64_t even = total / ch.size;
  ring_reduce_scatter<T>(
      ch, in, out,
      [&](int k) {
        const auto i = static_cast<std::size_t>(k);
        // The defect places chunk k where an even split would, clamped inside the buffer.
        const std::int64_t at = even_only ? std::min(k * even, total - counts[i]) : displs[i];
        return std::pair<std::int64_t, std::int64_t>{at, counts[i]};
      },
      largest);
}

template void reduce_scatter<float>(channel&, const float*, float*, std::span<const int>,
                                    std::span<const int>);
template void reduce_scatter<double>(channel&, const double*, double*, std::span<const int>,
                                     std::span<const int>);

}  // namespace shardcheck::par::native
