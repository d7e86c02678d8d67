#pragma once
// Fault-injecting collectives layers: each a `par::collectives` wrapping an inner one (the comm's
// checker or its implementation), breaking one thing and nothing else. The harness installs them
// through subject::wrap, one per comm of a case's mesh; a layer's state lasts one case.
//
// Every layer reports the traffic of the call the kernel asked for, so that the ledger sees a
// faulty collective as the real one: where a fault changes what moves (a skipped or re-rooted
// call, a reduction summed locally), the real call is also run, on a copy of its buffers in the
// layer's scratch (a "shadow" run), and its traffic is returned — whatever the backend.
//
// Example, p = 3, all-gather of counts 2,1,2 into [a a | b | c c] (rank 0 holds a, …):
//   ag_drop_last   ranks 0, 1 end with [a a | b | 0 0] (a part that never arrives reads zeros,
//                  whatever the buffer held), rank 2 is whole
//   ag_ring_short  rank r misses rank r+1's part: rank 0 [a a | 0 | c c], rank 2 [0 0 | b | c c]
//   ag_reversed    every rank ends with [c c | b | a a]
// and an all-reduce of x_0, x_1, x_2 (rank r's partial x_r, rank order tree (x_0+x_1)+x_2):
//   ar_skipped           rank r keeps x_r
//   ar_scatter_only      rank r keeps x_r except its balanced chunk, which holds the sum
//   ar_order_alternates  the first call sums (x_0+x_1)+x_2 on every rank, every later call
//                        (x_1+x_2)+x_0: two runs of a case differ, the ranks agree
//   ar_rank_order        rank r sums (x_r+x_r+1)+x_r+2: the ranks' replicas drift
//
// Scratch lives in untracked memory (untracked.hpp), so that a layer never shows in a kernel's
// measured peak.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "mutants/untracked.hpp"
#include "shardcheck/parallel/comm.hpp"

namespace shardcheck::prop::mutants {

// How often a cell's fault acted (changed something) in this process; shared by every layer a
// cell's wrapper builds. The selftest reads the leader's count (rank 0 takes part in every case).
struct fire_log {
  std::int64_t acts = 0;
};

// Forwards everything to the inner layer; an operator overrides what it breaks.
class fault_layer : public par::collectives {
 public:
  fault_layer(std::unique_ptr<par::collectives> inner, std::shared_ptr<fire_log> log)
      : inner_(std::move(inner)), log_(std::move(log)) {}
  [[nodiscard]] int rank() const override { return inner_->rank(); }
  [[nodiscard]] int size() const override { return inner_->size(); }
  [[nodiscard]] MPI_Comm native_handle() const override { return inner_->native_handle(); }
  par::traffic run(const par::call& c) override { return inner_->run(c); }
  void start(const par::call& c) override { inner_->start(c); }
  bool test() override { return inner_->test(); }
  par::traffic wait() override { return inner_->wait(); }
  [[nodiscard]] MPI_Request send(const par::message& m) override { return inner_->send(m); }
  void wait_send(MPI_Request& r) override { inner_->wait_send(r); }
  std::int64_t recv(const par::message& m) override { return inner_->recv(m); }

 protected:
  void fired() {
    if (log_ != nullptr) ++log_->acts;
  }
  // The real call c run on a copy of its result buffer (c.out untouched); its traffic.
  par::traffic shadow(const par::call& c);
  par::collectives& inner() { return *inner_; }

 private:
  std::unique_ptr<par::collectives> inner_;
  std::shared_ptr<fire_log> log_;
  untracked_vector<std::byte> shadow_;
};

// --- all-gather -----------------------------------------------------------------------------

// The last rank's part never arrives: the other ranks read zeros there.
class ag_drop_last final : public fault_layer {
 public:
  using fault_layer::fault_layer;
  par::traffic run(const par::call& c) override;
};

// A ring one step short: rank r never receives rank (r+1) mod p's part (it reads zeros there).
class ag_ring_short final : public fault_layer {
 public:
  using fault_layer::fault_layer;
  par::traffic run(const par::call& c) override;
};

// The parts laid out in reverse rank order: rank p−1's first.
class ag_reversed final : public fault_layer {
 public:
  using fault_layer::fault_layer;
  par::traffic run(const par::call& c) override;

 private:
  untracked_vector<std::byte> copy_;
};

// --- all-reduce (blocking) ------------------------------------------------------------------

// Never reduced: each rank keeps its own partial sums.
class ar_skipped final : public fault_layer {
 public:
  using fault_layer::fault_layer;
  par::traffic run(const par::call& c) override;
};

// Stops after the reduce-scatter half: each rank holds the sum in its balanced chunk
// (balanced_chunk(n, p, rank)) only, its own partial elsewhere.
class ar_scatter_only final : public fault_layer {
 public:
  using fault_layer::fault_layer;
  par::traffic run(const par::call& c) override;

 private:
  untracked_vector<std::byte> reduced_;
};

// Sums every rank's contribution locally, as a pairwise tree over an order of the ranks; the
// order is the same on every rank and chosen per call by order_of. Depth ⌈log₂ p⌉: within every
// backend's chain claim, so that only the intended property sees it.
class ar_local_sum : public fault_layer {
 public:
  using fault_layer::fault_layer;
  par::traffic run(const par::call& c) override;

 protected:
  // The rank order this rank sums in on call number `call` (0, 1, … on this comm); true if that
  // is the fault acting.
  virtual bool order_of(std::uint64_t call, std::span<int> order) = 0;

 private:
  std::uint64_t calls_ = 0;
  untracked_vector<std::byte> parts_;
  untracked_vector<std::int64_t> counts_;
  untracked_vector<int> order_;
};

// Determinism: the first call on a comm sums in rank order, every later call rotated by one
// (0,1,…,p−1 then 1,2,…,0), the same on every rank. A case's second run therefore differs from
// its first whatever number of calls lies between them. Changes bits only with p ≥ 3.
class ar_order_alternates final : public ar_local_sum {
 public:
  using ar_local_sum::ar_local_sum;

 protected:
  bool order_of(std::uint64_t call, std::span<int> order) override;
};

// Replicas: rank r sums starting from itself (r, r+1, …), on every call: deterministic, but
// the ranks' results differ in their last bits. Changes bits only with p ≥ 3.
class ar_rank_order final : public ar_local_sum {
 public:
  using ar_local_sum::ar_local_sum;

 protected:
  bool order_of(std::uint64_t call, std::span<int> order) override;
};

// --- reduce-scatter, broadcast, all-to-all ----------------------------------------------------

// Reads part k of the input where an even split would put it, min(k·⌊total/p⌋, total − c_k),
// instead of at its displacement Σ_{j<k} c_j. Changes nothing when the counts are even.
class rs_even_offsets final : public fault_layer {
 public:
  using fault_layer::fault_layer;
  par::traffic run(const par::call& c) override;

 private:
  untracked_vector<std::byte> in_;
};

// An f32 reduction whose partial sums travel in bfloat16: every element of a blocking
// all-reduce's or reduce-scatter's input rounded to the nearest bf16 (8 significant bits, ties to
// even) before the real call; f64 calls untouched. 1.00390625 (1 + 2⁻⁸) becomes 1, 1.01171875
// (1 + 3·2⁻⁸) becomes 1.015625. The bug class of reducing gradients in the storage dtype.
// Its error, about 2⁻⁹ of each partial, is below the rigorous bound (γ_kpar + γ_kref)·mag at
// K ≳ 1000 (uniform data), above the statistical one to K of several thousand.
class reduce_in_bf16 final : public fault_layer {
 public:
  using fault_layer::fault_layer;
  par::traffic run(const par::call& c) override;

 private:
  untracked_vector<std::byte> in_;
};

// Broadcasts from (root+1) mod p, blocking or started; reports the traffic of the broadcast asked
// for.
class bcast_wrong_root final : public fault_layer {
 public:
  using fault_layer::fault_layer;
  par::traffic run(const par::call& c) override;
  void start(const par::call& c) override;
  par::traffic wait() override;

 private:
  bool moved_ = false;  // the pending call is a moved broadcast
  par::traffic asked_;  // … and the traffic of the one asked for
};

// The received blocks laid out in reverse sender order.
class a2a_reversed final : public fault_layer {
 public:
  using fault_layer::fault_layer;
  par::traffic run(const par::call& c) override;

 private:
  untracked_vector<std::byte> copy_;
};

// --- any collective (above the checker) -------------------------------------------------------

// A layer that skips some calls: a skipped call returns at once (a started one is done at once),
// its buffers as they were, after `instead` (nothing by default).
class skipping_layer : public fault_layer {
 public:
  using fault_layer::fault_layer;
  par::traffic run(const par::call& c) override;
  void start(const par::call& c) override;
  bool test() override;
  par::traffic wait() override;

 private:
  virtual bool skips(const par::call& c) = 0;
  virtual void instead() {}
  bool skipped_start_ = false;
};

// Rank 0 skips its first collective (not a barrier) on a comm of two ranks or more, and goes on
// at once with a barrier in its place, so that the ranks disagree at that very collective (the
// checker's fingerprint fails every rank: `runs`). A plain skip would be caught only at rank 0's
// next call on the comm, or as ranks out of step if it was the comm's last (last_rank_stops).
class rank0_skips final : public skipping_layer {
 public:
  using skipping_layer::skipping_layer;

 private:
  bool skips(const par::call& c) override;
  void instead() override;
  bool done_ = false;
};

// The last rank of a comm of two ranks or more makes no collective after its first one there
// (each later call returns at once, its buffers as they were), as a kernel that returns early: the
// other ranks wait in a call it never makes, the flight recorder's case (flight.hpp: `runs`,
// "ranks out of step").
class last_rank_stops final : public skipping_layer {
 public:
  using skipping_layer::skipping_layer;

 private:
  bool skips(const par::call& c) override;
  int calls_ = 0;
};

// Every rank issues one barrier the kernel never asked for, before its first collective on the
// comm: the ledger holds an entry the claims do not.
class extra_barrier final : public fault_layer {
 public:
  using fault_layer::fault_layer;
  par::traffic run(const par::call& c) override;
  void start(const par::call& c) override;

 private:
  void once();
  bool done_ = false;
};

// --- started (non-blocking) collectives ------------------------------------------------------

// A started collective ends early: an all-gather without rank (r+1) mod p's part (the ring's
// last step; it reads zeros), a reduce-scatter or all-reduce skipped (each rank keeps its own
// partial of what it would receive). Blocking calls pass.
class started_early final : public fault_layer {
 public:
  using fault_layer::fault_layer;
  void start(const par::call& c) override;
  par::traffic wait() override;

 private:
  enum class pending { none, gather, reduce, scatter };
  pending pending_ = pending::none;
  par::call call_;
  std::int64_t at_ = 0, count_ = 0;  // the part to zero (gather) or keep (scatter), elements
  untracked_vector<std::byte> scratch_;
};

// --- point-to-point ---------------------------------------------------------------------------

// Every send delivers the payload of the previous message of the same size to the same peer when
// that one had a lower tag: micro-batch i's data arrives as micro-batch i+1's. A message whose
// tag is not above the previous one's (the first of a step: a pipeline tags its messages with
// the micro-batch, from 0 in every step) goes as it is, so that two runs of a case agree.
class p2p_lagged final : public fault_layer {
 public:
  using fault_layer::fault_layer;
  [[nodiscard]] MPI_Request send(const par::message& m) override;

 private:
  struct last {
    int peer = 0;
    std::size_t bytes = 0;
    int tag = 0;
    std::size_t buffer = 0;  // index in buffers_
  };
  untracked_vector<last> last_;
  // Every payload kept, so that a send's buffer outlives its wait_send. Freed with the layer.
  untracked_vector<untracked_vector<std::byte>> buffers_;
};

// Rank 0 waits, before its first collective on a comm of two ranks or more, for a message nobody
// sends: the case hangs (the watchdog's mutant; not in the selftest's matrix).
class unanswered final : public fault_layer {
 public:
  using fault_layer::fault_layer;
  par::traffic run(const par::call& c) override;
  void start(const par::call& c) override;

 private:
  void wait_forever();
};

}  // namespace shardcheck::prop::mutants
