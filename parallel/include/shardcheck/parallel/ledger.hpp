#pragma once
// The ledger: every collective a strategy issues, as this rank saw it. The cost model predicts the
// same entries, and a property compares the two exactly.
//
// This file is the one place the byte formulas live: the communicator records with them and the
// cost models predict with them. Which formula applies depends on the backend running the
// collectives (a case's `backend=`):
//
// `mpi` (Open MPI's built-ins; algorithm unknown): the logical payload of rank me.
//   all-gather(v)      sent = c_me,                    received = total − c_me
//   all-reduce         sent = n,                       received = n
//   reduce-scatter(v)  sent = total − c_me,            received = c_me
//   broadcast          root: sent = n, received 0; others: sent 0, received = n
//   all-to-all(v)      sent = Σ_{j≠me} send[j],        received = Σ_{j≠me} recv[j]
//   send / recv        the message, to / from `root` (the peer), on either backend
//
// `native` (parallel/src/collectives/): the bytes the algorithm really moves, which the
// communicator counts message by message.
//   all-gather(v) ring      sent = total − c_{me+1},      received = total − c_me
//   reduce-scatter(v) ring  sent = total − c_me,          received = total − c_{me−1}
//   all-reduce ring         reduce-scatter + all-gather over the balanced chunks c of n:
//                           sent = 2n − c_me − c_{me+1},  received = 2n − c_{me−1} − c_me
//   all-reduce recursive doubling (n ≤ 1024 elements), q = largest power of two ≤ p, L = log₂q:
//                           me < p − q: (L + 1)·n both ways; me ≥ q: n both ways; else L·n
//   broadcast binomial tree: n received off the root, n sent per child;
//             chain (n > 16384 elements, p > 2): n received off the root, n sent except by
//             the last
//   all-to-all(v) pairwise  as `mpi`
//   all-reduce tree (chosen: backend=native:all_reduce=tree): a binomial-tree reduce to rank 0,
//                           then a binomial broadcast back; c = the rank's children
//                           (binomial_children with root 0), u = 1 for every rank but 0: sent =
//                           received = (c + u)·n. Example p = 4: rank 0 (children 1, 2) 2n, rank 1
//                           n, rank 2 2n, rank 3 n
// (indices mod p). Example: ring all-reduce of n = 10 on p = 3, chunks 4,3,3: rank 0 sends
// 20 − 4 − 3 = 13 elements and receives 20 − 3 − 4 = 13; rank 2 sends 20 − 3 − 4 = 13 and
// receives 20 − 3 − 3 = 14. For even chunks that is nccl-tests' 2(p−1)/p·n.
// On one rank nothing leaves or arrives: both are 0.
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace shardcheck::par {

// send / recv: point-to-point messages (a pipeline's activations and gradients), ledgered like
// collectives so that the cost model states them too.
enum class collective {
  all_gather,
  all_reduce,
  reduce_scatter,
  broadcast,
  all_to_all,
  // A rooted MPI_Reduce, recorded only from raw MPI calls (pmpi.hpp): shardcheck's own comm never
  // issues one. A non-root rank sends its n elements; the root receives (p − 1)·n.
  reduce,
  barrier,
  send,
  recv,
  // One-sided MPI, recorded only from raw calls (pmpi.hpp); `root` is the target rank where the
  // call has one. Window creation (MPI_Win_create, _allocate, _allocate_shared, _create_dynamic:
  // elements = this rank's window bytes, elem_bytes 1), MPI_Win_free and MPI_Win_fence are
  // collective over the window's communicator; the rest concern one rank or this rank alone.
  win_create,
  win_free,
  put,               // and MPI_Rput: count × size of the origin datatype sent
  get,               // and MPI_Rget: received
  accumulate,        // and MPI_Raccumulate: sent
  get_accumulate,    // and MPI_Rget_accumulate: origin sent, result received
  fetch_and_op,      // one element sent, one received
  compare_and_swap,  // two elements sent (origin, compare), one received
  win_fence,
  win_lock,  // lock, unlock, flush, flush_local: root = the target
  win_unlock,
  win_lock_all,
  win_unlock_all,
  win_flush,
  win_flush_all,
  win_flush_local,
  win_flush_local_all,
  win_post,  // post, start: elements = the ranks of the group
  win_start,
  win_complete,
  win_wait
};
// Whether entries of kind c name a peer (send, recv) or a target (one-sided) in `root`.
[[nodiscard]] bool names_peer(collective c);
// "root", "peer" or "target": what `root` means for kind c.
[[nodiscard]] std::string_view root_name(collective c);
// Window creation, free and fence: collective over the window's communicator.
[[nodiscard]] bool one_sided(collective c);
enum class phase { forward, backward };
// Which implementation runs a communicator's collectives.
enum class backend { mpi, native };
// The algorithm a backend runs for one call; `builtin` is Open MPI's own choice. `tree`: the
// all-reduce as a binomial-tree reduce to rank 0 and a binomial broadcast back.
enum class algorithm { builtin, ring, recursive_doubling, binomial_tree, chain, pairwise, tree };

// The native algorithms a case chooses, per collective; a collective without a choice gets the
// one algorithm_of picks by size. Chosen on the replay line after the backend:
//   backend=native:all_reduce=tree   (several: backend=native:all_reduce=tree,broadcast=chain)
// Choices: all_reduce ring or tree, broadcast binomial_tree or chain.
class algorithm_choice {
 public:
  // Throws invalid_problem when the native backend has no such algorithm for `kind`.
  void set(collective kind, algorithm a);
  // builtin: no choice made.
  [[nodiscard]] algorithm of(collective kind) const;
  [[nodiscard]] bool empty() const;
  // "all_reduce=tree,broadcast=chain"; empty when nothing is chosen.
  [[nodiscard]] std::string to_string() const;
  // The same form; throws invalid_problem naming the bad part.
  [[nodiscard]] static algorithm_choice parse(std::string_view s);
  [[nodiscard]] bool same_as(const algorithm_choice& o) const { return chosen_ == o.chosen_; }

 private:
  std::array<algorithm, 9> chosen_{};  // by collective; builtin where nothing is chosen
};

// A backend with the algorithms chosen for it (only the native backend takes choices). Converts
// from and to `backend`, so that a kernel's cost model passes its case's `backend` to the entry
// functions below and they apply its choices:
//   all_reduce_entry(c.backend, n, me, p, es)   // the tree's bytes when c chose it
struct backend_spec {
  par::backend kind = par::backend::mpi;
  algorithm_choice algorithms;
  backend_spec() = default;
  backend_spec(par::backend k) : kind(k) {}
  backend_spec(par::backend k, algorithm_choice a) : kind(k), algorithms(a) {}
  operator par::backend() const { return kind; }
};

[[nodiscard]] std::string_view to_string(collective c);
[[nodiscard]] std::string_view to_string(phase p);
[[nodiscard]] std::string_view to_string(backend b);
[[nodiscard]] std::string_view to_string(algorithm a);
// "mpi" or "native"; throws invalid_problem.
[[nodiscard]] backend parse_backend(std::string_view s);
// "mpi", "native" or "native:<choices>" (see algorithm_choice); throws invalid_problem.
[[nodiscard]] backend_spec parse_backend_spec(std::string_view s);
// The same form: "native:all_reduce=tree", or just the backend's name.
[[nodiscard]] std::string to_string(const backend_spec& b);

// The algorithm `b` runs for a collective of `count` elements (the whole buffer) on p ranks.
// A choice of b's wins over the size rule.
[[nodiscard]] algorithm algorithm_of(const backend_spec& b, collective kind, int p,
                                     std::int64_t count);
// Additions on the longest chain behind one reduced element: mpi p − 1 (the algorithm is
// unknown, so the worst order), native ring p − 1, recursive doubling and tree ⌈log₂ p⌉. Example:
// p = 3, native all-reduce of 20 elements (recursive doubling): rank 2 folds into rank 0, then one
// exchange: 2 additions, where the ring would chain 2 as well and p = 4 gives 2 against 3. The
// tree at p = 16: rank 0 adds rank 1's, 2's, 4's and 8's partial sums, 4 additions against 15.
[[nodiscard]] std::int64_t reduction_depth(const backend_spec& b, collective kind, int p,
                                           std::int64_t count);

struct ledger_entry {
  phase when = phase::forward;
  collective kind = collective::barrier;
  int axis = 0;  // mesh axis of the communicator (0 on a one-axis mesh)
  std::size_t elem_bytes = 0;
  std::int64_t elements = 0;  // elements in this rank's result buffer
  std::int64_t bytes_sent = 0;
  std::int64_t bytes_received = 0;
  int root = -1;  // broadcast: the root; send / recv: the peer

  friend bool operator==(const ledger_entry&, const ledger_entry&) = default;
};

[[nodiscard]] std::string to_string(const ledger_entry& e);

// The entries that one call of each collective makes on rank `me` of `p`; the communicator records
// them and cost models predict with them.
[[nodiscard]] ledger_entry all_gather_entry(backend b, std::span<const std::int64_t> counts, int me,
                                            std::size_t elem_bytes);
[[nodiscard]] ledger_entry all_reduce_entry(const backend_spec& b, std::int64_t n, int me, int p,
                                            std::size_t elem_bytes);
[[nodiscard]] ledger_entry reduce_scatter_entry(backend b, std::span<const std::int64_t> counts,
                                                int me, std::size_t elem_bytes);
// MPI_Reduce of n elements to `root`, as recorded from a raw call.
[[nodiscard]] ledger_entry reduce_entry(std::int64_t n, int root, int me, int p,
                                        std::size_t elem_bytes);
[[nodiscard]] ledger_entry broadcast_entry(const backend_spec& b, std::int64_t n, int root, int me,
                                           int p, std::size_t elem_bytes);
[[nodiscard]] ledger_entry all_to_all_entry(backend b, std::span<const std::int64_t> send_counts,
                                            std::span<const std::int64_t> recv_counts, int me,
                                            std::size_t elem_bytes);
// A point-to-point message of n elements to / from rank `peer` of the communicator.
[[nodiscard]] ledger_entry send_entry(std::int64_t n, int peer, std::size_t elem_bytes);
[[nodiscard]] ledger_entry recv_entry(std::int64_t n, int peer, std::size_t elem_bytes);
// One-sided MPI (recorded from raw calls, pmpi.hpp). bytes: the window's bytes on this rank.
[[nodiscard]] ledger_entry win_create_entry(std::int64_t bytes);
// MPI_Put / _Get / _Accumulate (and their R… forms) of n elements of elem_bytes to / from rank
// `target` of the window's communicator.
[[nodiscard]] ledger_entry put_entry(std::int64_t n, int target, std::size_t elem_bytes);
[[nodiscard]] ledger_entry get_entry(std::int64_t n, int target, std::size_t elem_bytes);
[[nodiscard]] ledger_entry accumulate_entry(std::int64_t n, int target, std::size_t elem_bytes);
// MPI_Get_accumulate: n origin elements of elem_bytes sent, result_bytes received.
[[nodiscard]] ledger_entry get_accumulate_entry(std::int64_t n, int target, std::size_t elem_bytes,
                                                std::int64_t result_bytes);
[[nodiscard]] ledger_entry fetch_and_op_entry(int target, std::size_t elem_bytes);
[[nodiscard]] ledger_entry compare_and_swap_entry(int target, std::size_t elem_bytes);
// A synchronisation call that moves no data (win_free, win_fence, win_lock … win_wait): target
// for lock, unlock, flush and flush_local; elements the group's ranks for post and start.
[[nodiscard]] ledger_entry win_sync_entry(collective kind, int target = -1,
                                          std::int64_t elements = 0);
// Children of rank me in the binomial broadcast tree rooted at root.
[[nodiscard]] int binomial_children(int me, int root, int p);
// Part k of n split evenly over p (the first n mod p parts one longer): {offset, size}.
[[nodiscard]] std::pair<std::int64_t, std::int64_t> balanced_chunk(std::int64_t n, int p, int k);

// The ledger's storage is shardcheck's, counted in the MPI meter (memory.hpp) wherever it grows:
// never the kernel's peak. (Reserved in the kernel's meter and grown inside a recorded MPI call,
// the first block went back to the kernel's meter when freed, and a kernel's peak read up to that
// block's bytes low.)
class ledger {
 public:
  ledger();
  void set_phase(phase p) { phase_ = p; }
  // Records e in the current phase. Never allocates below 256 entries.
  void record(ledger_entry e, int axis);
  void clear() { entries_.clear(); }
  // Room for n entries, so that recording them allocates nothing (callers reserve outside the
  // measured scope what the cost model predicts).
  void reserve(std::size_t n);
  [[nodiscard]] const std::vector<ledger_entry>& entries() const { return entries_; }
  // Sets the bytes of entry i (a non-blocking collective's, known once it completes); an index
  // past the end (the ledger was cleared meanwhile) is ignored.
  void set_bytes(std::size_t i, std::int64_t sent, std::int64_t received) {
    if (i >= entries_.size()) return;
    entries_[i].bytes_sent = sent;
    entries_[i].bytes_received = received;
  }

 private:
  phase phase_ = phase::forward;
  std::vector<ledger_entry> entries_;
};

}  // namespace shardcheck::par
