#include <climits>

#include "collectives/native.hpp"
#include "shardcheck/parallel/memory.hpp"

namespace shardcheck::par::native {

namespace {
// One code path for every addition, so that partners adding the same (a, b) get the same bits.
template <class T>
void add(std::byte* dest, const std::byte* a, const std::byte* b, std::int64_t n) {
  T* d = reinterpret_cast<T*>(dest);
  const T* x = reinterpret_cast<const T*>(a);
  const T* y = reinterpret_cast<const T*>(b);
  for (std::int64_t i = 0; i < n; ++i) d[i] = x[i] + y[i];
}

int largest_power_of_two_upto(int p) {
  int q = 1;
  while (2 * q <= p) q *= 2;
  return q;
}

// Child u (0: the nearest) of rank r in the binomial tree rooted at 0 on p ranks: r + 2^i for the
// i-th power of two below r's lowest set bit with r + 2^i < p. Example p = 6: rank 0's children
// are 1, 2, 4; rank 4's is 5.
int tree_child(int r, int p, int u) {
  for (int mask = 1; mask < p && (r & mask) == 0; mask <<= 1)
    if (r + mask < p && u-- == 0) return r + mask;
  return -1;
}
// r's parent: r less its lowest set bit (r > 0).
int tree_parent(int r) { return r & (r - 1); }
}  // namespace

template <class T>
schedule schedule::typed(channel ch, kind k) {
  schedule s;
  s.ch_ = ch;
  s.kind_ = k;
  s.type_ = mpi_type<T>();
  s.elem_ = sizeof(T);
  s.add_ = &add<T>;
  return s;
}

template <class T>
schedule schedule::ring(channel ch, const T* in, T* out, bool reduce, T* data, bool gather,
                        std::span<const int> counts, std::span<const int> displs) {
  schedule s = typed<T>(ch, kind::ring);
  s.in_ = reinterpret_cast<const std::byte*>(in);
  s.out_ = reinterpret_cast<std::byte*>(out);
  s.data_ = reinterpret_cast<std::byte*>(data);
  s.counts_ = counts;
  s.displs_ = displs;
  s.seg_ = ch.segment<T>();
  const int p = ch.size;
  if (p > 1 && reduce) {
    const std::int64_t largest = *std::max_element(counts.begin(), counts.end());
    const std::int64_t segments = (largest + s.seg_ - 1) / s.seg_;
    if (segments * (p - 1) > INT_MAX) throw invalid_problem("native ring: too many steps");
    s.reduce_steps_ = static_cast<int>(segments) * (p - 1);
  }
  s.steps_ = s.reduce_steps_ + (gather ? p - 1 : 0);
  return s;
}

template <class T>
schedule schedule::recursive_doubling(channel ch, std::span<T> buffer) {
  schedule s = typed<T>(ch, kind::recursive_doubling);
  s.data_ = reinterpret_cast<std::byte*>(buffer.data());
  s.n_ = static_cast<std::int64_t>(buffer.size());
  if (s.n_ > ch.segment<T>())
    throw invalid_problem("recursive doubling: buffer larger than scratch");
  const int p = ch.size, r = ch.rank, q = largest_power_of_two_upto(p);
  int rounds = 0;
  while ((1 << rounds) < q) ++rounds;
  // Ranks ≥ q: fold into r − q, get the result back. Ranks < p − q: take the fold, the rounds,
  // hand the result back. The others: the rounds.
  s.steps_ = p == 1 ? 0 : r >= q ? 2 : rounds + (r < p - q ? 2 : 0);
  return s;
}

template <class T>
schedule schedule::tree(channel ch, std::span<T> buffer) {
  schedule s = typed<T>(ch, kind::tree);
  s.data_ = reinterpret_cast<std::byte*>(buffer.data());
  s.n_ = static_cast<std::int64_t>(buffer.size());
  s.seg_ = ch.segment<T>();
  const int p = ch.size, r = ch.rank;
  if (p == 1 || s.n_ == 0) return s;
  s.children_ = binomial_children(r, 0, p);
  s.per_segment_ = 2 * s.children_ + (r != 0 ? 2 : 0);
  const std::int64_t segments = (s.n_ + s.seg_ - 1) / s.seg_;
  if (segments * s.per_segment_ > INT_MAX) throw invalid_problem("native tree: too many steps");
  s.steps_ = static_cast<int>(segments) * s.per_segment_;
  return s;
}

template <class T>
schedule schedule::broadcast(channel ch, std::span<T> buffer, int root, bool chain) {
  schedule s = typed<T>(ch, chain ? kind::chain : kind::binomial);
  s.data_ = reinterpret_cast<std::byte*>(buffer.data());
  s.n_ = static_cast<std::int64_t>(buffer.size());
  s.root_ = root;
  const int p = ch.size, vr = mod(ch.rank - root, p);
  if (p == 1 || s.n_ == 0) return s;
  if (chain) {
    s.seg_ = ch.segment<T>();
    const std::int64_t segments = (s.n_ + s.seg_ - 1) / s.seg_;
    if (segments >= INT_MAX) throw invalid_problem("native chain: too many steps");
    s.steps_ = static_cast<int>(segments) + 1;
  } else {
    s.children_ = binomial_children(vr, 0, p);
    s.steps_ = s.children_ + (vr != 0 ? 1 : 0);
  }
  return s;
}

std::pair<std::int64_t, std::int64_t> schedule::chunk(int k) const {
  const auto i = static_cast<std::size_t>(mod(k, ch_.size));
  return {displs_[i], counts_[i]};
}

schedule::step schedule::describe(int t) const {
  const int p = ch_.size, r = ch_.rank;
  const int offset = ch_.started ? tags::started_offset : 0;
  step st;
  if (kind_ == kind::tree) {
    const std::int64_t g0 = static_cast<std::int64_t>(t / per_segment_) * seg_;
    const std::int64_t len = std::min(seg_, n_ - g0);
    const int u = t % per_segment_, up = r != 0 ? 2 : 0;
    std::byte* const mine = at(data_, g0);
    if (u < children_)  // a child's partial sum into the scratch
      st = {nullptr, 0, -1, ch_.scratch.data(), len, tree_child(r, p, u), tags::tree_reduce};
    else if (up > 0 && u == children_)
      st = {mine, len, tree_parent(r), nullptr, 0, -1, tags::tree_reduce};
    else if (up > 0 && u == children_ + 1)
      st = {nullptr, 0, -1, mine, len, tree_parent(r), tags::tree_broadcast};
    else  // the total to the children, the farthest (largest subtree) first
      st = {mine,
            len,
            tree_child(r, p, 2 * children_ + up - 1 - u),
            nullptr,
            0,
            -1,
            tags::tree_broadcast};
    st.tag += offset;
    return st;
  }
  if (kind_ == kind::binomial) {
    const int vr = mod(r - root_, p), up = vr != 0 ? 1 : 0;
    if (t < up) {  // the whole buffer from the parent
      st.recv = data_;
      st.recv_n = n_;
      st.from = mod(tree_parent(vr) + root_, p);
    } else {  // … then to each child, the farthest first
      st.send = data_;
      st.send_n = n_;
      st.to = mod(tree_child(vr, p, children_ - 1 - (t - up)) + root_, p);
    }
    st.tag = tags::broadcast + offset;
    return st;
  }
  if (kind_ == kind::chain) {
    const int vr = mod(r - root_, p);
    const int segments = steps_ - 1;
    const auto length = [&](int g) { return std::min(seg_, n_ - g * seg_); };
    if (t > 0 && vr + 1 < p) {  // segment t − 1 on
      st.send = at(data_, (t - 1) * seg_);
      st.send_n = length(t - 1);
      st.to = mod(r + 1, p);
    }
    if (t < segments && vr > 0) {  // segment t in
      st.recv = at(data_, t * seg_);
      st.recv_n = length(t);
      st.from = mod(r - 1, p);
    }
    st.tag = tags::broadcast + offset;
    return st;
  }
  if (kind_ == kind::recursive_doubling) {
    const int q = largest_power_of_two_upto(p);
    std::byte* other = ch_.scratch.data();
    if (r >= q) {
      if (t == 0)
        st = {data_, n_, r - q, nullptr, 0, -1, tags::fold};
      else
        st = {nullptr, 0, -1, data_, n_, r - q, tags::unfold};
    } else {
      const bool folds = r < p - q;
      const int round = t - (folds ? 1 : 0);
      if (folds && t == 0)
        st = {nullptr, 0, -1, other, n_, r + q, tags::fold};
      else if (folds && t + 1 == steps_)
        st = {data_, n_, r + q, nullptr, 0, -1, tags::unfold};
      else {
        const int partner = r ^ (1 << round);
        st = {data_, n_, partner, other, n_, partner, tags::doubling};
      }
    }
    st.tag += offset;
    return st;
  }
  if (t < reduce_steps_) {
    const int s = t % (p - 1);
    const std::int64_t g0 = static_cast<std::int64_t>(t / (p - 1)) * seg_;
    const auto part = [&](std::int64_t len) { return std::clamp<std::int64_t>(len - g0, 0, seg_); };
    const auto [so, sl] = chunk(r - s - 1);
    const auto rl = chunk(r - s - 2).second;
    std::byte* const a = ch_.scratch.data();
    std::byte* const b = at(a, seg_);
    // Step s receives into one half of the scratch and sends what step s − 1 received and added.
    std::byte* const recv = s % 2 == 0 ? b : a;
    const std::byte* const prev = s % 2 == 0 ? a : b;
    const std::int64_t sn = part(sl), rn = part(rl);
    const std::byte* send = s > 0 ? prev : sn > 0 ? at(in_, so + g0) : in_;
    return {send, sn, mod(r + 1, p), recv, rn, mod(r - 1, p), tags::ring_reduce + offset};
  }
  const int s = t - reduce_steps_;
  const auto [so, sn] = chunk(r - s);
  const auto [ro, rn] = chunk(r - s - 1);
  return {at(data_, so),
          sn,
          mod(r + 1, p),
          at(data_, ro),
          rn,
          mod(r - 1, p),
          tags::ring_gather + offset};
}

void schedule::finish(int t) {
  const int p = ch_.size, r = ch_.rank;
  if (kind_ == kind::binomial || kind_ == kind::chain) return;  // nothing to add
  if (kind_ == kind::tree) {
    if (t % per_segment_ >= children_) return;
    const std::int64_t g0 = static_cast<std::int64_t>(t / per_segment_) * seg_;
    add_(at(data_, g0), at(data_, g0), ch_.scratch.data(), std::min(seg_, n_ - g0));
    return;
  }
  if (kind_ == kind::recursive_doubling) {
    const int q = largest_power_of_two_upto(p);
    if (r >= q) return;
    const bool folds = r < p - q;
    const std::byte* other = ch_.scratch.data();
    if (folds && t == 0) {
      add_(data_, data_, other, n_);
    } else if (!(folds && t + 1 == steps_)) {
      // Both partners add (lower rank's data, higher rank's data) with the same code.
      const int partner = r ^ (1 << (t - (folds ? 1 : 0)));
      add_(data_, r < partner ? data_ : other, r < partner ? other : data_, n_);
    }
    return;
  }
  if (t >= reduce_steps_) return;
  // The partial that arrived plus this rank's own addend; the last step of a segment leaves the
  // complete sum in out.
  const int s = t % (p - 1);
  const std::int64_t g0 = static_cast<std::int64_t>(t / (p - 1)) * seg_;
  const step st = describe(t);
  const std::int64_t ro = chunk(r - s - 2).first;
  std::byte* dest = s + 2 == p ? at(out_, g0) : st.recv;
  add_(dest, st.recv, at(in_, ro + g0), st.recv_n);
}

void schedule::post(int t) {
  const step st = describe(t);
  ch_.post(st.send, st.send_n, st.to, st.recv, st.recv_n, st.from, type_, elem_, st.tag, reqs_);
  posted_ = true;
}

bool schedule::test() {
  while (next_ < steps_) {
    if (!posted_) post(next_);
    int complete = 0;
    {
      const mem::mpi_heap in_mpi;  // what MPI allocates is its own, not the kernel's
      check_mpi(MPI_Testall(2, reqs_, &complete, MPI_STATUSES_IGNORE), "MPI_Testall");
    }
    if (complete == 0) return false;
    posted_ = false;
    finish(next_++);
  }
  return true;
}

void schedule::wait() {
  while (next_ < steps_) {
    if (!posted_) post(next_);
    {
      const mem::mpi_heap in_mpi;
      check_mpi(MPI_Waitall(2, reqs_, MPI_STATUSES_IGNORE), "MPI_Waitall");
    }
    posted_ = false;
    finish(next_++);
  }
}

#define SHARDCHECK_SCHEDULE_INSTANTIATE(T)                                                         \
  template schedule schedule::ring<T>(channel, const T*, T*, bool, T*, bool, std::span<const int>, \
                                      std::span<const int>);                                       \
  template schedule schedule::recursive_doubling<T>(channel, std::span<T>);                        \
  template schedule schedule::tree<T>(channel, std::span<T>);                                      \
  template schedule schedule::broadcast<T>(channel, std::span<T>, int, bool);
SHARDCHECK_SCHEDULE_INSTANTIATE(float)
SHARDCHECK_SCHEDULE_INSTANTIATE(double)
// Sums in the storage dtype (reduce=bf16 / f16): each addition widens, adds in f32 and rounds.
SHARDCHECK_SCHEDULE_INSTANTIATE(bfloat16_t)
SHARDCHECK_SCHEDULE_INSTANTIATE(half_t)
#undef SHARDCHECK_SCHEDULE_INSTANTIATE

}  // namespace shardcheck::par::native
