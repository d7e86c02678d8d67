#include "collectives/native.hpp"

namespace shardcheck::par::native {

template <class T>
schedule all_gather(channel ch, T* buffer, std::span<const int> counts,
                    std::span<const int> displs) {
  return schedule::ring<T>(ch, nullptr, nullptr, false, buffer, true, counts, displs);
}

template schedule all_gather<float>(channel, float*, std::span<const int>, std::span<const int>);
template schedule all_gather<double>(channel, double*, std::span<const int>, std::span<const int>);
template schedule all_gather<bfloat16_t>(channel, bfloat16_t*, std::span<const int>,
                                         std::span<const int>);
template schedule all_gather<half_t>(channel, half_t*, std::span<const int>, std::span<const int>);

}  // namespace shardcheck::par::native
