#include "collectives/native.hpp"

namespace shardcheck::par::native {

template <class T>
void all_gather(channel& ch, T* buffer, std::span<const int> counts, std::span<const int> displs) {
  ring_all_gather<T>(ch, buffer, [&](int k) {
    const auto i = static_cast<std::size_t>(k);
    return std::pair<std::int64_t, std::int64_t>{displs[i], counts[i]};
  });
}

template void all_gather<float>(channel&, float*, std::span<const int>, std::span<const int>);
template void all_gather<double>(channel&, double*, std::span<const int>, std::span<const int>);

}  // namespace shardcheck::par::native
