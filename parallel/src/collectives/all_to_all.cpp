#include "collectives/native.hpp"

#include <algorithm>

namespace shardcheck::par::native {

template <class T>
void all_to_all(channel& ch, const T* in, std::span<const int> send_counts,
                std::span<const int> send_displs, T* out, std::span<const int> recv_counts,
                std::span<const int> recv_displs) {
  const int p = ch.size, r = ch.rank;
  const auto me = static_cast<std::size_t>(r);
  if (send_counts[me] != recv_counts[me])
    throw invalid_problem("all_to_all: this rank sends itself " + std::to_string(send_counts[me]) +
                          " elements but expects " + std::to_string(recv_counts[me]));
  std::copy_n(in + send_displs[me], send_counts[me], out + recv_displs[me]);
  for (int s = 1; s < p; ++s) {
    const auto to = static_cast<std::size_t>(mod(r + s, p));
    const auto from = static_cast<std::size_t>(mod(r - s, p));
    ch.exchange(in + send_displs[to], send_counts[to], static_cast<int>(to),
                out + recv_displs[from], recv_counts[from], static_cast<int>(from), mpi_type<T>(),
                sizeof(T), tags::all_to_all);
  }
}

template void all_to_all<float>(channel&, const float*, std::span<const int>, std::span<const int>,
                                float*, std::span<const int>, std::span<const int>);
template void all_to_all<double>(channel&, const double*, std::span<const int>,
                                 std::span<const int>, double*, std::span<const int>,
                                 std::span<const int>);
template void all_to_all<bfloat16_t>(channel&, const bfloat16_t*, std::span<const int>,
                                     std::span<const int>, bfloat16_t*, std::span<const int>,
                                     std::span<const int>);
template void all_to_all<half_t>(channel&, const half_t*, std::span<const int>,
                                 std::span<const int>, half_t*, std::span<const int>,
                                 std::span<const int>);

}  // namespace shardcheck::par::native
