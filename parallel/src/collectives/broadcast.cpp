#include "collectives/native.hpp"

namespace shardcheck::par::native {

namespace {
// Binomial tree over ranks relative to the root: vr receives from vr − (its lowest set bit), then
// sends to vr + m for every lower power of two m. Example p = 5, root 0: 0→4, 0→2, 0→1, 2→3.
template <class T>
void binomial(channel& ch, std::span<T> buffer, int root) {
  const int p = ch.size, vr = mod(ch.rank - root, p);
  const auto n = static_cast<std::int64_t>(buffer.size());
  int mask = 1;
  while (mask < p && (vr & mask) == 0) mask <<= 1;
  const MPI_Datatype t = mpi_type<T>();
  if (vr != 0) ch.recv(buffer.data(), n, mod(ch.rank - mask, p), t, sizeof(T), tags::broadcast);
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (vr + mask < p)
      ch.send(buffer.data(), n, mod(ch.rank + mask, p), t, sizeof(T), tags::broadcast);
}

// A chain root → root+1 → … in segments, so every link is busy at once on large buffers.
template <class T>
void chain(channel& ch, std::span<T> buffer, int root) {
  const int p = ch.size, vr = mod(ch.rank - root, p);
  const auto n = static_cast<std::int64_t>(buffer.size());
  const std::int64_t seg = ch.segment<T>();
  const MPI_Datatype t = mpi_type<T>();
  for (std::int64_t g0 = 0; g0 < n; g0 += seg) {
    const std::int64_t len = std::min(seg, n - g0);
    if (vr > 0)
      ch.recv(buffer.data() + g0, len, mod(ch.rank - 1, p), t, sizeof(T), tags::broadcast);
    if (vr + 1 < p)
      ch.send(buffer.data() + g0, len, mod(ch.rank + 1, p), t, sizeof(T), tags::broadcast);
  }
}
}  // namespace

template <class T>
void broadcast(channel& ch, std::span<T> buffer, int root) {
  if (ch.size == 1) return;
  if (algorithm_of(backend::native, collective::broadcast, ch.size,
                   static_cast<std::int64_t>(buffer.size())) == algorithm::chain)
    chain<T>(ch, buffer, root);
  else
    binomial<T>(ch, buffer, root);
}

template void broadcast<float>(channel&, std::span<float>, int);
template void broadcast<double>(channel&, std::span<double>, int);
template void broadcast<bfloat16_t>(channel&, std::span<bfloat16_t>, int);
template void broadcast<half_t>(channel&, std::span<half_t>, int);

}  // namespace shardcheck::par::native
