#include "collectives/native.hpp"

namespace shardcheck::par::native {

template <class T>
schedule broadcast(channel ch, std::span<T> buffer, int root) {
  const bool chain =
      ch.size > 1 && ch.algorithm_for(collective::broadcast,
                                      static_cast<std::int64_t>(buffer.size())) == algorithm::chain;
  return schedule::broadcast<T>(ch, buffer, root, chain);
}

template schedule broadcast<float>(channel, std::span<float>, int);
template schedule broadcast<double>(channel, std::span<double>, int);
template schedule broadcast<bfloat16_t>(channel, std::span<bfloat16_t>, int);
template schedule broadcast<half_t>(channel, std::span<half_t>, int);

}  // namespace shardcheck::par::native
