// The raw MPI calls GA_Dgemm's adapter makes through Global Arrays 5.8.2 on ARMCI-MPI 0.3.1,
// replayed from their source for one rank: ga_dgemm's ledger claim (ga_dgemm.hpp says what it
// covers). Every call below names the function of GA (global/src) or ARMCI-MPI (src) it replays.
//
// The two libraries as Debian builds them (Open MPI; ARMCI-MPI's defaults, no ARMCI_* variable
// set):
//   ARMCI-MPI  every process its own node (topology.c); a global allocation is a window
//     (gmr_create: MPI_Allreduce of the largest slice, MPI_Win_allocate, MPI_Allgather of each
//     slice's base and size, MPI_Win_lock_all; gmr_destroy: MPI_Allreduce of an int, MPI_Bcast
//     of the base from the highest rank, MPI_Win_unlock_all, MPI_Win_free). A strided transfer
//     is an I/O vector (ARMCI_STRIDED_METHOD=IOV) moved one contiguous piece at a time
//     (ARMCI_IOV_METHOD=BATCHED): put = MPI_Accumulate(MPI_REPLACE) in bytes, get =
//     MPI_Get_accumulate(MPI_NO_OP) in bytes (ARMCI_RMA_ATOMICITY=1), acc = MPI_Accumulate(SUM)
//     in the array's type; a blocking one ends with MPI_Win_flush_local on its target, a
//     non-blocking one with nothing, and waiting its handle (aggregate) flushes every window
//     with MPI_Win_flush_local_all. ARMCI_AllFence is MPI_Win_flush_all on every window.
//   GA  a global array is ARMCI_Malloc'd with one element of padding (GA_ELEM_PADDING) and its
//     alignment all-reduced (pnga_allocate: two syncs first, one after); a sync
//     (pnga_pgroup_sync) is ARMCI_AllFence and a barrier. One-sided calls walk the processes
//     holding a patch in gai_iterator's order: ascending, shuffled by gaPermuteProcList (glibc's
//     rand() seeded with the caller's rank); NGA_Put and NGA_Get go to each in that order
//     (DISABLE_NBOPT), NGA_Acc to the others first and to itself last.
// GA's arrays are 2-D and numbered as Fortran does: an R × C row-major matrix of the adapter is
// GA's (C, R), its second dimension dealt by rows (ga_rows). Below, "rows" are the adapter's and
// a patch is [i0, i1] of GA's first dimension (the adapter's columns) by [j0, j1] of its second
// (the adapter's rows), 0-based and inclusive.
#pragma once
#include <stdlib.h>  // initstate_r, random_r (glibc)

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <shardcheck/parallel/kernel.hpp>
#include <utility>
#include <vector>

namespace mylab::ga_ledger {
namespace sc = shardcheck::par;

// An array as the adapter makes it: its rows as GA deals them and its columns.
struct array {
  sc::partition rows;
  std::int64_t cols = 0;
};

// A patch of an array in GA's numbering: [i0, i1] of its columns, [j0, j1] of its rows.
struct patch {
  std::int64_t i0, i1, j0, j1;
};

// gaPermuteProcList (global/src/iterator.c): the order in which gai_iterator visits the n
// processes holding a patch, as indices into their ascending list. srand(GAme) and n swaps with
// rand() % n; glibc's rand() is random() on a 128-byte TYPE_3 state, which initstate_r replays
// without touching the process's own.
[[nodiscard]] inline std::vector<int> iterator_order(int n, int me) {
  std::vector<int> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  if (n <= 1) return order;
  random_data rng{};
  char state[128] = {};
  initstate_r(static_cast<unsigned>(me), state, sizeof state, &rng);
  for (int i = 0; i < n; ++i) {
    std::int32_t r = 0;
    random_r(&rng, &r);
    std::swap(order[static_cast<std::size_t>(r % n)], order[static_cast<std::size_t>(i)]);
  }
  return order;
}

// One rank's entries, in the order it makes them.
class replay {
 public:
  replay(int p, int me, std::int64_t elem_bytes, std::int64_t ma_avail)
      : p_(p), me_(me), e_(elem_bytes), avail_(ma_avail) {}

  [[nodiscard]] std::vector<sc::ledger_entry> take() { return std::move(out_); }

  // NGA_Create: pnga_allocate → gai_get_shmem → ARMCI_Malloc → gmr_create.
  void create(const array& a) {
    sync();
    sync();
    const std::int64_t bytes = a.rows.size(me_) * a.cols * e_ + e_;  // GA_ELEM_PADDING
    all_reduce(1, 8);                                                // the largest slice
    push(sc::win_create_entry(bytes));
    const std::vector<std::int64_t> slices(static_cast<std::size_t>(p_), 16);  // {base, size}
    push(sc::all_gather_entry(sc::backend::mpi, slices, me_, 1));
    push(sc::win_sync_entry(sc::collective::win_lock_all));
    ++windows_;
    all_reduce(p_, 8);  // each rank's alignment adjustment (pnga_gop "+")
    sync();
  }

  // GA_Destroy: pnga_destroy → ARMCI_Free → gmr_destroy (every rank holds rows: the highest
  // rank's base is broadcast).
  void destroy() {
    sync();
    all_reduce(1, 4);
    push(sc::broadcast_entry(sc::backend::mpi, 8, p_ - 1, me_, p_, 1));
    push(sc::win_sync_entry(sc::collective::win_unlock_all));
    push(sc::win_sync_entry(sc::collective::win_free));
    --windows_;
    sync();
  }

  // NGA_Put / NGA_Get of this rank's own rows (put_local, get_local).
  void put_own(const array& a) { put(a, own(a)); }
  void get_own(const array& a) { get(a, own(a)); }

  // GA_Dgemm(ta, tb, m, n, k, a, b, c) = pnga_matmul(tb, ta, b, a, c) in GA's numbering: C is
  // n × m there, op(b) n × k, op(a) k × m.
  void gemm(char ta, char tb, std::int64_t m, std::int64_t n, std::int64_t k, const array& a,
            const array& b, const array& c) {
    matmul(tb, ta, n, m, k, b, a, c);
  }

  // False when GA does not come through the replayed calls: its task list cannot take a row of
  // C's chunks (nloops > MAX_CHUNKS aborts, nloops = MAX_CHUNKS never progresses).
  [[nodiscard]] bool replayed() const { return replayed_; }

 private:
  static constexpr std::int64_t chunk_size = 256, block_size = 1024, max_chunks = 1024;
  static constexpr std::int64_t aspect_ratio = 3, num_mats = 3, min_tasks = 10;

  void push(sc::ledger_entry e) { out_.push_back(e); }
  void all_reduce(std::int64_t n, std::int64_t bytes) {
    push(sc::all_reduce_entry(sc::backend::mpi, n, me_, p_, static_cast<std::size_t>(bytes)));
  }
  // pnga_pgroup_sync: ARMCI_AllFence, then pnga_msg_pgroup_sync's barrier.
  void sync() {
    for (int w = 0; w < windows_; ++w) push(sc::win_sync_entry(sc::collective::win_flush_all));
    sc::ledger_entry b;
    b.kind = sc::collective::barrier;
    push(b);
  }

  [[nodiscard]] patch own(const array& a) const {
    const std::int64_t first = a.rows.offset(me_);
    return {0, a.cols - 1, first, first + a.rows.size(me_) - 1};
  }

  // The processes holding rows [j0, j1] of a, with how many each, in gai_iterator's order.
  [[nodiscard]] std::vector<std::pair<int, std::int64_t>> owners(const array& a,
                                                                 const patch& x) const {
    std::vector<std::pair<int, std::int64_t>> held;
    for (int q = 0; q < p_; ++q) {
      const std::int64_t lo = std::max(x.j0, a.rows.offset(q));
      const std::int64_t hi = std::min(x.j1, a.rows.offset(q) + a.rows.size(q) - 1);
      if (hi >= lo) held.emplace_back(q, hi - lo + 1);
    }
    std::vector<std::pair<int, std::int64_t>> out;
    for (const int i : iterator_order(static_cast<int>(held.size()), me_))
      out.push_back(held[static_cast<std::size_t>(i)]);
    return out;
  }

  // ARMCI_Wait on one aggregate handle: every window flushed locally.
  void wait_one() {
    for (int w = 0; w < windows_; ++w)
      push(sc::win_sync_entry(sc::collective::win_flush_local_all));
  }
  // pnga_nbwait: each ARMCI handle of a GA handle (one per process the transfer went to).
  void wait(int handles) {
    for (int h = 0; h < handles; ++h) wait_one();
  }

  // NGA_NbGet: one ARMCI_NbGetS per process holding part of x, a MPI_Get_accumulate per row;
  // returns the handles to wait.
  int nbget(const array& a, const patch& x) {
    const auto held = owners(a, x);
    for (const auto& [q, rows] : held)
      for (std::int64_t r = 0; r < rows; ++r)
        push(sc::get_accumulate_entry(0, q, 1, (x.i1 - x.i0 + 1) * e_));
    return static_cast<int>(held.size());
  }
  // NGA_Get: ngai_gets, i.e. a non-blocking get and its wait, per process.
  void get(const array& a, const patch& x) {
    for (const auto& [q, rows] : owners(a, x)) {
      for (std::int64_t r = 0; r < rows; ++r)
        push(sc::get_accumulate_entry(0, q, 1, (x.i1 - x.i0 + 1) * e_));
      wait_one();
    }
  }
  // NGA_Put: ARMCI_PutS per process, a MPI_Accumulate(REPLACE) of bytes per row.
  void put(const array& a, const patch& x) {
    for (const auto& [q, rows] : owners(a, x)) {
      for (std::int64_t r = 0; r < rows; ++r)
        push(sc::accumulate_entry((x.i1 - x.i0 + 1) * e_, q, 1));
      push(sc::win_sync_entry(sc::collective::win_flush_local, q));
    }
  }
  // NGA_Acc: ARMCI_AccS to the other processes in iterator order, then to this one.
  void acc(const array& a, const patch& x) {
    const auto held = owners(a, x);
    for (const bool local : {false, true})
      for (const auto& [q, rows] : held) {
        if ((q == me_) != local) continue;
        for (std::int64_t r = 0; r < rows; ++r)
          push(sc::accumulate_entry(x.i1 - x.i0 + 1, q, static_cast<std::size_t>(e_)));
        push(sc::win_sync_entry(sc::collective::win_flush_local, q));
      }
  }

  // The first chunk sizes pnga_matmul takes from rank q's blocks of C, A and B.
  struct chunks {
    std::int64_t i, j, k;
  };
  [[nodiscard]] chunks local_chunks(int q, const array& a, const array& b, const array& c) const {
    chunks x{std::min(c.cols, a.cols), std::min(c.rows.size(q), b.rows.size(q)),
             std::min(a.rows.size(q), b.cols)};
    for (std::int64_t* v : {&x.i, &x.j, &x.k})
      if (*v <= 0) *v = 1;
    return x;
  }

  // gai_get_chunk_size (matmul.c).
  void chunk_size_of(bool irregular, chunks& x, std::int64_t m, std::int64_t n, std::int64_t k,
                     std::int64_t nbuf, bool contig) const {
    const std::int64_t tmpa = x.i, tmpb = x.j;
    std::int64_t max_chunk = 0;
    if (irregular) {
      const double temp =
          (static_cast<double>(k) * (static_cast<double>(m) * static_cast<double>(n))) /
          static_cast<double>(min_tasks * p_);
      max_chunk = static_cast<std::int64_t>(std::pow(temp, 1.0 / 3.0));
      if (max_chunk < chunk_size) max_chunk = chunk_size;  // MIN_CHUNK_SIZE
    } else {
      max_chunk = std::max({x.i, x.j, x.k});
    }
    if (max_chunk > chunk_size / nbuf) {
      const auto elems = static_cast<std::int64_t>(static_cast<double>(avail_) * 0.9);
      max_chunk = std::min(max_chunk, static_cast<std::int64_t>(std::sqrt(static_cast<double>(
                                          (elems - nbuf * num_mats) / (nbuf * num_mats)))));
      if (!irregular) max_chunk = x.i = x.j = x.k = block_size;  // ARMCI memory: always taken
      if (irregular) {
        x.i = std::min(m, max_chunk);
        x.j = std::min(n, max_chunk);
        x.k = std::min(k, max_chunk);
      } else {
        double temp = static_cast<double>(max_chunk * max_chunk);
        if (x.i < max_chunk && x.k > max_chunk) {
          x.k = std::min(x.k, static_cast<std::int64_t>(temp / static_cast<double>(x.i)));
          x.j = std::min(x.j, static_cast<std::int64_t>(temp / static_cast<double>(x.k)));
        } else if (x.k < max_chunk && x.i > max_chunk) {
          temp *= 1.0 / static_cast<double>(x.k);
          x.i = std::min(x.i, static_cast<std::int64_t>(temp));
          x.j = std::min(x.j, static_cast<std::int64_t>(temp));
        } else {
          x.i = x.j = x.k = max_chunk;
        }
      }
    } else {
      x.i = x.j = x.k = chunk_size / nbuf;
    }
    if (contig && !irregular) {  // CONTIG_CHUNKS_OPT_FLAG
      if (x.i > tmpa && x.j > tmpb) {
        x.i = tmpa;
        x.j = tmpb;
        x.k = std::min(x.i, x.j);
      } else {
        std::int64_t i = 1;
        const double temp = static_cast<double>(max_chunk * max_chunk);
        if (temp > static_cast<double>(tmpa)) {
          x.i = tmpa;
          x.j = static_cast<std::int64_t>(temp / static_cast<double>(x.i));
          if (x.j < tmpb) {
            while (tmpb / i > x.j) ++i;
            x.j = tmpb / i;
          } else {
            x.j = tmpb;
          }
          x.k = std::min(x.i, x.j);
        }
      }
    }
    for (std::int64_t* v : {&x.i, &x.j, &x.k})
      if (*v <= 0) *v = 1;
  }

  // pnga_matmul (matmul.c) in GA's numbering: C (m × n) = op(A) · op(B), contraction k.
  void matmul(char ta, char tb, std::int64_t m, std::int64_t n, std::int64_t k, const array& a,
              const array& b, const array& c) {
    sync();
    // The aspect check on every rank's chunks, all-reduced (pnga_pgroup_gop "max").
    bool irregular = false;
    for (int q = 0; q < p_; ++q) {
      const chunks x = local_chunks(q, a, b, c);
      if (x.i / x.k > aspect_ratio || x.k / x.i > aspect_ratio || x.j / x.k > aspect_ratio ||
          x.k / x.j > aspect_ratio)
        irregular = true;
    }
    all_reduce(1, 8);
    const bool nb = p_ > 1;  // GA_Cluster_nnodes() > 1: the non-blocking algorithms
    chunks x = local_chunks(me_, a, b, c);
    all_reduce(1, 8);  // pnga_memory_avail_type's minimum
    chunk_size_of(irregular, x, m, n, k, nb ? 2 : 1, nb);
    if (!nb)
      shmem(ta, tb, m, k, a, b, c, x);
    else if (irregular)
      irregular_path(ta, tb, m, n, k, a, b, c, x);
    else
      regular_path(ta, tb, k, a, b, c, x);
    sync();
  }

  // A's chunk [i0, i1] × [k0, k1] and B's [k0, k1] × [j0, j1] as patches of the arrays.
  static patch a_patch(char t, std::int64_t i0, std::int64_t i1, std::int64_t k0, std::int64_t k1) {
    return t == 'n' || t == 'N' ? patch{i0, i1, k0, k1} : patch{k0, k1, i0, i1};
  }
  static patch b_patch(char t, std::int64_t k0, std::int64_t k1, std::int64_t j0, std::int64_t j1) {
    return t == 'n' || t == 'N' ? patch{k0, k1, j0, j1} : patch{j0, j1, k0, k1};
  }

  // gai_matmul_shmem: one process, blocking gets, a put for C's first k-chunk, then accs.
  void shmem(char ta, char tb, std::int64_t m, std::int64_t k, const array& a, const array& b,
             const array& c, const chunks& x) {
    const std::int64_t j_end = c.rows.offset(me_) + c.rows.size(me_) - 1;
    for (std::int64_t jlo = c.rows.offset(me_); jlo <= j_end; jlo += x.j) {
      const std::int64_t jhi = std::min(j_end, jlo + x.j - 1);
      bool do_put = true;
      for (std::int64_t klo = 0; klo < k; klo += x.k) {
        const std::int64_t khi = std::min(k - 1, klo + x.k - 1);
        bool new_b = true;
        for (std::int64_t ilo = 0; ilo < m; ilo += x.i) {
          const std::int64_t ihi = std::min(m - 1, ilo + x.i - 1);
          get(a, a_patch(ta, ilo, ihi, klo, khi));
          if (new_b) get(b, b_patch(tb, klo, khi, jlo, jhi));
          new_b = false;
          if (do_put)
            put(c, {ilo, ihi, jlo, jhi});
          else
            acc(c, {ilo, ihi, jlo, jhi});
        }
        do_put = false;
      }
    }
  }

  struct task {
    std::int64_t i0, i1, k0, k1;
    std::size_t b;  // its chunk of B
    bool do_put;
  };
  struct b_chunk {
    std::int64_t k0, k1, j0, j1;
  };

  // gai_matmul_regular: this rank's block of C in tasks (gai_get_task_list), each getting its
  // chunks of A and B ahead (non-blocking, two buffers), then putting its first k-chunk into C
  // and accumulating the rest. At most MAX_CHUNKS tasks a round, the list resumed from its state.
  void regular_path(char ta, char tb, std::int64_t k, const array& a, const array& b,
                    const array& c, const chunks& x) {
    const std::int64_t i_end = c.cols - 1, j_start = c.rows.offset(me_),
                       j_end = j_start + c.rows.size(me_) - 1;
    std::int64_t state_j = -1, state_k = 0;
    bool state_put = false, more = false;
    do {
      // gai_get_task_list
      std::vector<task> tasks;
      std::vector<b_chunk> bs;
      const std::int64_t nloops = (i_end + 1) / x.i + ((i_end + 1) % x.i ? 1 : 0);
      if (nloops >= max_chunks) {
        replayed_ = false;
        return;
      }
      bool recovery = state_j != -1;
      more = false;
      std::int64_t j_from = recovery ? state_j : j_start;
      for (std::int64_t jlo = j_from; jlo <= j_end && !more; jlo += x.j) {
        const std::int64_t jhi = std::min(j_end, jlo + x.j - 1);
        bool do_put = true;
        std::int64_t k_from = 0;
        if (recovery) {
          do_put = state_put;
          k_from = state_k;
        }
        for (std::int64_t klo = k_from; klo <= k - 1; klo += x.k) {
          const std::int64_t khi = std::min(k - 1, klo + x.k - 1);
          bool new_b = true;
          recovery = false;
          if (static_cast<std::int64_t>(tasks.size()) + nloops >= max_chunks) {
            more = true;
            state_j = jlo;
            state_k = klo;
            state_put = do_put;
            break;
          }
          for (std::int64_t ilo = 0; ilo <= i_end; ilo += x.i) {
            const std::int64_t ihi = std::min(i_end, ilo + x.i - 1);
            if (new_b) {
              bs.push_back({klo, khi, jlo, jhi});
              new_b = false;
            }
            tasks.push_back({ilo, ihi, klo, khi, bs.size() - 1, do_put});
          }
          do_put = false;
        }
      }
      if (!more) state_j = -1;
      // DIRECT_ACCESS_OPT_FLAG: a single task of a resumed list writes C in place.
      const bool single = more && tasks.size() == 1;
      std::size_t next = 0, next_b = 0;
      int pending_a = 0, pending_b = 0;
      bool new_b = false;
      if (!tasks.empty()) {
        next_b = tasks[0].b;
        pending_a = nbget(a, a_patch(ta, tasks[0].i0, tasks[0].i1, tasks[0].k0, tasks[0].k1));
        const b_chunk& y = bs[next_b];
        pending_b = nbget(b, b_patch(tb, y.k0, y.k1, y.j0, y.j1));
        new_b = true;
      }
      while (next < tasks.size()) {
        const std::size_t cur = next, cur_b = tasks[cur].b;
        ++next;
        wait(pending_a);
        if (new_b) {
          new_b = false;
          wait(pending_b);
        }
        if (next < tasks.size()) {
          const task& t = tasks[next];
          pending_a = nbget(a, a_patch(ta, t.i0, t.i1, t.k0, t.k1));
          next_b = t.b;
          if (cur_b != next_b) {
            const b_chunk& y = bs[next_b];
            pending_b = nbget(b, b_patch(tb, y.k0, y.k1, y.j0, y.j1));
          }
        }
        if (cur_b != next_b) new_b = true;
        if (!single) {
          const patch into{tasks[cur].i0, tasks[cur].i1, bs[cur_b].j0, bs[cur_b].j1};
          if (tasks[cur].do_put)
            put(c, into);
          else
            acc(c, into);
        }
      }
    } while (more);
  }

  // gai_matmul_irreg: C zeroed (pnga_fill_patch: two syncs), then every process takes the
  // chunks ijk with ijk mod p = its rank, in (j, k, i) order, getting each ahead and
  // accumulating the one before into C.
  void irregular_path(char ta, char tb, std::int64_t m, std::int64_t n, std::int64_t k,
                      const array& a, const array& b, const array& c, const chunks& x) {
    sync();
    sync();
    struct previous {
      patch into;
      int handles_a, handles_b;
      bool new_b;
    } prev{};
    bool computed = false;
    std::int64_t ijk = 0;
    const auto finish = [&] {
      wait(prev.handles_a);
      if (prev.new_b) wait(prev.handles_b);
      acc(c, prev.into);
    };
    for (std::int64_t jlo = 0; jlo < n; jlo += x.j) {
      const std::int64_t jhi = std::min(n - 1, jlo + x.j - 1);
      for (std::int64_t klo = 0; klo < k; klo += x.k) {
        const std::int64_t khi = std::min(k - 1, klo + x.k - 1);
        bool new_b = true;
        for (std::int64_t ilo = 0; ilo < m; ilo += x.i, ++ijk) {
          if (ijk % p_ != me_) continue;
          const std::int64_t ihi = std::min(m - 1, ilo + x.i - 1);
          const int ha = nbget(a, a_patch(ta, ilo, ihi, klo, khi));
          const int hb = new_b ? nbget(b, b_patch(tb, klo, khi, jlo, jhi)) : 0;
          if (computed) finish();
          computed = true;
          prev = {{ilo, ihi, jlo, jhi}, ha, hb, new_b};
          new_b = false;
        }
      }
    }
    if (computed) finish();
  }

  int p_, me_;
  std::int64_t e_, avail_;
  int windows_ = 0;
  bool replayed_ = true;
  std::vector<sc::ledger_entry> out_;
};

}  // namespace mylab::ga_ledger
