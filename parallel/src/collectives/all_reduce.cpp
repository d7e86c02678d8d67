#include "collectives/native.hpp"

namespace shardcheck::par::native {

namespace {
// Recursive doubling. q = the largest power of two ≤ p; ranks q..p−1 first fold into rank − q and
// get the result back at the end. Partners add the lower rank's data first, so both hold the same
// bits. Example p = 3: rank 2 folds into rank 0 (x0 + x2), then ranks 0 and 1 exchange:
// (x0 + x2) + x1 on both, and rank 0 hands it to rank 2.
template <class T>
void recursive_doubling(channel& ch, std::span<T> buffer) {
  const int p = ch.size, r = ch.rank;
  const auto n = static_cast<std::int64_t>(buffer.size());
  if (n > ch.segment<T>()) throw invalid_problem("recursive doubling: buffer larger than scratch");
  T* const other = reinterpret_cast<T*>(ch.scratch.data());
  T* const data = buffer.data();
  int q = 1;
  while (2 * q <= p) q *= 2;
  if (r >= q) {
    ch.send(data, n, r - q, mpi_type<T>(), sizeof(T), 21);
    ch.recv(data, n, r - q, mpi_type<T>(), sizeof(T), 22);
    return;
  }
  if (r < p - q) {
    ch.recv(other, n, r + q, mpi_type<T>(), sizeof(T), 21);
    for (std::int64_t i = 0; i < n; ++i) data[i] = data[i] + other[i];
  }
  for (int mask = 1; mask < q; mask <<= 1) {
    const int partner = r ^ mask;
    ch.exchange(data, n, partner, other, n, partner, mpi_type<T>(), sizeof(T), 23);
    // One loop for both partners: the compiler may swap the operands of +, which changes which
    // NaN payload survives, so both must run the very same code on the same (lo, hi).
    const T* lo = r < partner ? data : other;
    const T* hi = r < partner ? other : data;
    for (std::int64_t i = 0; i < n; ++i) data[i] = lo[i] + hi[i];
  }
  if (r < p - q) ch.send(data, n, r + q, mpi_type<T>(), sizeof(T), 22);
}
}  // namespace

template <class T>
void all_reduce(channel& ch, std::span<T> buffer) {
  const int p = ch.size;
  const auto n = static_cast<std::int64_t>(buffer.size());
  if (p == 1) return;
  if (algorithm_of(backend::native, collective::all_reduce, p, n) ==
      algorithm::recursive_doubling) {
    recursive_doubling<T>(ch, buffer);
    return;
  }
  const auto chunk = [&](int k) { return balanced_chunk(n, p, k); };
  T* const data = buffer.data();
  ring_reduce_scatter<T>(ch, data, data + chunk(ch.rank).first, chunk, chunk(0).second);
  if (ch.defect != collective_defect::all_reduce_no_gather) ring_all_gather<T>(ch, data, chunk);
}

template void all_reduce<float>(channel&, std::span<float>);
template void all_reduce<double>(channel&, std::span<double>);

}  // namespace shardcheck::par::native
