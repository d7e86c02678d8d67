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

// A chain root → root+1 → … in segments, so every link is busy at once on large buffers: a rank
// receives segment g + 1 while it forwards segment g. Example p = 3, 3 segments: rank 1 receives
// s0; then receives s1 while sending s0 to rank 2; then s2 while sending s1; then sends s2.
template <class T>
void chain(channel& ch, std::span<T> buffer, int root) {
  const int p = ch.size, vr = mod(ch.rank - root, p);
  const auto n = static_cast<std::int64_t>(buffer.size());
  const std::int64_t seg = ch.segment<T>();
  const MPI_Datatype t = mpi_type<T>();
  const int from = vr > 0 ? mod(ch.rank - 1, p) : -1, to = vr + 1 < p ? mod(ch.rank + 1, p) : -1;
  const auto length = [&](std::int64_t g0) { return std::min(seg, n - g0); };
  MPI_Request reqs[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};  // a receive, a send
  if (from >= 0)
    ch.post(nullptr, 0, -1, buffer.data(), length(0), from, t, sizeof(T), tags::broadcast, reqs);
  for (std::int64_t g0 = 0; g0 < n; g0 += seg) {
    check_mpi(MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE), "MPI_Waitall");
    const std::int64_t next = g0 + seg;
    const bool more = from >= 0 && next < n;
    ch.post(buffer.data() + g0, length(g0), to, more ? buffer.data() + next : nullptr,
            more ? length(next) : 0, more ? from : -1, t, sizeof(T), tags::broadcast, reqs);
  }
  check_mpi(MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE), "MPI_Waitall");
}
}  // namespace

template <class T>
void broadcast(channel& ch, std::span<T> buffer, int root) {
  if (ch.size == 1) return;
  if (ch.algorithm_for(collective::broadcast, static_cast<std::int64_t>(buffer.size())) ==
      algorithm::chain)
    chain<T>(ch, buffer, root);
  else
    binomial<T>(ch, buffer, root);
}

template void broadcast<float>(channel&, std::span<float>, int);
template void broadcast<double>(channel&, std::span<double>, int);
template void broadcast<bfloat16_t>(channel&, std::span<bfloat16_t>, int);
template void broadcast<half_t>(channel&, std::span<half_t>, int);

}  // namespace shardcheck::par::native
