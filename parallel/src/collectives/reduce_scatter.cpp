#include "collectives/native.hpp"

#include <algorithm>

namespace shardcheck::par::native {

template <class T>
schedule reduce_scatter(channel ch, const T* in, T* out, std::span<const int> counts,
                        std::span<const int> displs) {
  const auto me = static_cast<std::size_t>(ch.rank);
  if (ch.size == 1) {
    std::copy_n(in + displs[me], counts[me], out);
    return {};
  }
  return schedule::ring<T>(ch, in, out, true, nullptr, false, counts, displs);
}

template schedule reduce_scatter<float>(channel, const float*, float*, std::span<const int>,
                                        std::span<const int>);
template schedule reduce_scatter<double>(channel, const double*, double*, std::span<const int>,
                                         std::span<const int>);
template schedule reduce_scatter<bfloat16_t>(channel, const bfloat16_t*, bfloat16_t*,
                                             std::span<const int>, std::span<const int>);
template schedule reduce_scatter<half_t>(channel, const half_t*, half_t*, std::span<const int>,
                                         std::span<const int>);

}  // namespace shardcheck::par::native
