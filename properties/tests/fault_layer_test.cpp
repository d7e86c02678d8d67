// Each fault layer against a fake inner layer: it changes what it claims to, returns the real
// call's traffic, and leaves every other collective alone.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "fake_collectives.hpp"
#include "mutants/faults.hpp"
#include "shardcheck/parallel/memory.hpp"

namespace shardcheck::prop {
namespace {
using par::call;
using par::collective;
using testing::fake_collectives;
using testing::fake_stack;
using v = std::vector<double>;
using counts_t = std::vector<std::int64_t>;

call gather_call(v& buf, const counts_t& counts) {
  call c;
  c.kind = collective::all_gather;
  c.out = buf.data();
  c.count = static_cast<std::int64_t>(buf.size());
  c.counts = counts;
  return c;
}
call reduce_call(v& buf) {
  call c;
  c.kind = collective::all_reduce;
  c.out = buf.data();
  c.count = static_cast<std::int64_t>(buf.size());
  return c;
}
call scatter_call(const v& in, v& out, const counts_t& counts) {
  call c;
  c.kind = collective::reduce_scatter;
  c.in = in.data();
  c.out = out.data();
  c.count = static_cast<std::int64_t>(out.size());
  c.counts = counts;
  c.in_count = static_cast<std::int64_t>(in.size());
  return c;
}
call broadcast_call(v& buf, int root) {
  call c;
  c.kind = collective::broadcast;
  c.out = buf.data();
  c.count = static_cast<std::int64_t>(buf.size());
  c.root = root;
  return c;
}
call a2a_call(const v& in, const counts_t& send, v& out, const counts_t& recv) {
  call c;
  c.kind = collective::all_to_all;
  c.in = in.data();
  c.out = out.data();
  c.count = static_cast<std::int64_t>(out.size());
  c.counts = send;
  c.recv_counts = recv;
  return c;
}

bool same_traffic(par::traffic a, par::traffic b) {
  return a.sent == b.sent && a.received == b.received;
}

// The layer L on rank me of p over a fake, with its fire log.
template <class L>
struct rig {
  rig(int me, int p) : stack(me, p), fake(stack.fake) {
    layer = std::make_unique<L>(std::move(stack.owner), log);
  }
  fake_stack stack;
  fake_collectives* fake;
  std::shared_ptr<mutants::fire_log> log = std::make_shared<mutants::fire_log>();
  std::unique_ptr<L> layer;
};

// What the bare fake gives for c (on a copy of the buffer v).
v bare(int me, int p, call c, v buf) {
  fake_collectives f(me, p);
  c.out = buf.data();
  (void)f.run(c);
  return buf;
}

// --- all-gather -------------------------------------------------------------------------------

TEST(fault_layer, drops_last_chunk) {
  const counts_t counts{2, 1, 2};
  rig<mutants::ag_drop_last> r(0, 3);
  v buf{7, 7, -1, -1, -1};
  const call c = gather_call(buf, counts);
  EXPECT_TRUE(same_traffic(r.layer->run(c), fake_collectives::traffic_of(c)));
  EXPECT_EQ(buf, (v{7, 7, 200, 0, 0}));  // rank 2's part never arrived: zeros
  EXPECT_EQ(r.log->acts, 1);
  // The last rank itself holds its part: nothing to drop.
  rig<mutants::ag_drop_last> last(2, 3);
  v mine{-1, -1, -1, 9, 9};
  (void)last.layer->run(gather_call(mine, counts));
  EXPECT_EQ(mine, (v{100, 101, 200, 9, 9}));
  EXPECT_EQ(last.log->acts, 0);
}

TEST(fault_layer, drops_nothing_of_an_empty_last_part) {
  const counts_t counts{2, 1, 0};
  rig<mutants::ag_drop_last> r(0, 3);
  v buf{7, 7, -1};
  (void)r.layer->run(gather_call(buf, counts));
  EXPECT_EQ(buf, (v{7, 7, 200}));
  EXPECT_EQ(r.log->acts, 0);
}

TEST(fault_layer, ring_short_misses_the_successors_part) {
  const counts_t counts{2, 1, 2};
  rig<mutants::ag_ring_short> r(1, 3);
  v buf{-1, -1, 8, -1, -1};
  const call c = gather_call(buf, counts);
  EXPECT_TRUE(same_traffic(r.layer->run(c), fake_collectives::traffic_of(c)));
  EXPECT_EQ(buf, (v{100, 101, 8, 0, 0}));  // rank 2's part missing on rank 1
  rig<mutants::ag_ring_short> wrap(2, 3);
  v last{-1, -1, -1, 9, 9};
  (void)wrap.layer->run(gather_call(last, counts));
  EXPECT_EQ(last, (v{0, 0, 200, 9, 9}));  // rank 0's part missing on rank 2
}

TEST(fault_layer, reverses_the_gathered_parts) {
  const counts_t counts{2, 1, 2};
  rig<mutants::ag_reversed> r(0, 3);
  v buf{7, 7, -1, -1, -1};
  const call c = gather_call(buf, counts);
  EXPECT_TRUE(same_traffic(r.layer->run(c), fake_collectives::traffic_of(c)));
  EXPECT_EQ(buf, (v{300, 301, 200, 7, 7}));
  EXPECT_EQ(r.log->acts, 1);
}

// --- all-reduce -------------------------------------------------------------------------------

TEST(fault_layer, skipped_all_reduce_keeps_the_partial_and_reports_the_real_traffic) {
  rig<mutants::ar_skipped> r(1, 3);
  v buf{1, 2, 3};
  const call c = reduce_call(buf);
  EXPECT_TRUE(same_traffic(r.layer->run(c), fake_collectives::traffic_of(c)));
  EXPECT_EQ(buf, (v{1, 2, 3}));
  ASSERT_EQ(r.fake->calls.size(), 1u);  // the shadow run, on a copy
  EXPECT_EQ(r.fake->calls[0].kind, collective::all_reduce);
  EXPECT_EQ(r.log->acts, 1);
}

// reduce_in_bf16 acts on f32 reductions only (its rounding is shown by the selftest's gate cell
// and cli.statistical_tier_fires): an f64 all-reduce of 1 + 2⁻⁸ passes untouched, unacted.
TEST(fault_layer, bf16_reduction_leaves_f64_alone) {
  rig<mutants::reduce_in_bf16> r(1, 3);
  const v start{1.00390625, 1.01171875, 0.5};
  v buf = start;
  const call c = reduce_call(buf);
  EXPECT_TRUE(same_traffic(r.layer->run(c), fake_collectives::traffic_of(c)));
  EXPECT_EQ(buf, bare(1, 3, c, start));
  EXPECT_EQ(r.log->acts, 0);
}

TEST(fault_layer, scatter_only_reduces_the_own_balanced_chunk) {
  rig<mutants::ar_scatter_only> r(1, 3);
  v buf(7, 1.0);  // balanced chunks of 7 over 3: 3, 2, 2; rank 1 holds [3, 5)
  const call c = reduce_call(buf);
  EXPECT_TRUE(same_traffic(r.layer->run(c), fake_collectives::traffic_of(c)));
  const v full = bare(1, 3, c, v(7, 1.0));
  for (std::size_t i = 0; i < 7; ++i)
    EXPECT_EQ(buf[i], i == 3 || i == 4 ? full[i] : 1.0) << "element " << i;
}

TEST(fault_layer, order_alternates_changes_the_order_after_the_first_call) {
  // x_0 = 1 (this rank), x_1 = 1e16, x_2 = −1e16: (x_0+x_1)+x_2 = 0, (x_1+x_2)+x_0 = 1.
  rig<mutants::ar_order_alternates> r(0, 3);
  r.fake->values = [](int q, std::int64_t) { return q == 1 ? 1e16 : -1e16; };
  v first{1.0}, second{1.0};
  const call c = reduce_call(first);
  EXPECT_TRUE(same_traffic(r.layer->run(c), fake_collectives::traffic_of(c)));
  EXPECT_EQ(first[0], 0.0);
  EXPECT_EQ(r.log->acts, 0);  // the first call is the reference order
  (void)r.layer->run(reduce_call(second));
  EXPECT_EQ(second[0], 1.0);
  EXPECT_EQ(r.log->acts, 1);
  // Each call: the shadow all-reduce, then the gather of every contribution.
  ASSERT_EQ(r.fake->calls.size(), 4u);
  EXPECT_EQ(r.fake->calls[1].kind, collective::all_gather);
  EXPECT_EQ(r.fake->calls[1].count, 3);
}

TEST(fault_layer, rank_order_starts_each_rank_at_itself) {
  // The same contributions x_0 = 1, x_1 = 1e16, x_2 = −1e16 seen from ranks 0 and 1.
  const auto world = [](int q, std::int64_t) { return q == 0 ? 1.0 : q == 1 ? 1e16 : -1e16; };
  rig<mutants::ar_rank_order> r0(0, 3), r1(1, 3);
  r0.fake->values = world;
  r1.fake->values = world;
  v on0{1.0}, on1{1e16};
  (void)r0.layer->run(reduce_call(on0));
  (void)r1.layer->run(reduce_call(on1));
  EXPECT_EQ(on0[0], 0.0);  // (x_0 + x_1) + x_2
  EXPECT_EQ(on1[0], 1.0);  // (x_1 + x_2) + x_0
}

TEST(fault_layer, order_faults_need_three_ranks) {
  rig<mutants::ar_rank_order> r(1, 2);
  v buf{1, 2};
  const call c = reduce_call(buf);
  const v want = bare(1, 2, c, buf);
  (void)r.layer->run(c);
  EXPECT_EQ(buf, want);
  EXPECT_EQ(r.log->acts, 0);
}

// --- reduce-scatter, broadcast, all-to-all ----------------------------------------------------

TEST(fault_layer, even_offsets_reads_parts_where_an_even_split_puts_them) {
  // counts 3,2,2 (displacements 0,3,5); an even split of 7 over 3 puts part 1 at 2, part 2 at 4.
  const counts_t counts{3, 2, 2};
  const v in{0, 1, 2, 3, 4, 5, 6};
  rig<mutants::rs_even_offsets> r(1, 3);
  v out(2, 0.0);
  const call c = scatter_call(in, out, counts);
  EXPECT_TRUE(same_traffic(r.layer->run(c), fake_collectives::traffic_of(c)));
  EXPECT_EQ(out[0], 2 + fake_collectives::value(0, 3) + fake_collectives::value(2, 3));
  EXPECT_EQ(out[1], 3 + fake_collectives::value(0, 4) + fake_collectives::value(2, 4));
  EXPECT_EQ(r.log->acts, 1);
}

TEST(fault_layer, even_offsets_changes_nothing_for_even_counts) {
  const counts_t counts{2, 2, 2};
  const v in{0, 1, 2, 3, 4, 5};
  rig<mutants::rs_even_offsets> r(1, 3);
  v out(2, 0.0);
  (void)r.layer->run(scatter_call(in, out, counts));
  EXPECT_EQ(out[0], 2 + fake_collectives::value(0, 2) + fake_collectives::value(2, 2));
  EXPECT_EQ(r.log->acts, 0);
}

TEST(fault_layer, wrong_root_broadcasts_from_the_next_rank) {
  rig<mutants::bcast_wrong_root> r(0, 3);
  v buf{5, 6};
  const call c = broadcast_call(buf, 0);
  // The traffic of the broadcast from root 0 (received = root + 2 in the fake's code).
  EXPECT_TRUE(same_traffic(r.layer->run(c), fake_collectives::traffic_of(c)));
  EXPECT_EQ(buf, (v{200, 201}));  // rank 1's data
  ASSERT_EQ(r.fake->calls.size(), 2u);
  EXPECT_EQ(r.fake->calls[1].root, 1);
}

TEST(fault_layer, wrong_root_moves_a_started_broadcast_too) {
  rig<mutants::bcast_wrong_root> r(0, 3);
  v buf{5, 6};
  const call c = broadcast_call(buf, 0);
  r.layer->start(c);
  EXPECT_TRUE(same_traffic(r.layer->wait(), fake_collectives::traffic_of(c)));
  EXPECT_EQ(buf, (v{200, 201}));  // rank 1's data
  ASSERT_EQ(r.fake->calls.size(), 2u);
  EXPECT_TRUE(r.fake->calls[1].started);
  EXPECT_EQ(r.fake->calls[1].root, 1);
  EXPECT_EQ(r.log->acts, 1);
}

TEST(fault_layer, reverses_the_received_all_to_all_blocks) {
  const counts_t send{1, 1, 1}, recv{1, 2, 1};
  const v in{10, 11, 12};
  rig<mutants::a2a_reversed> r(0, 3);
  v out(4, 0.0);
  const call c = a2a_call(in, send, out, recv);
  EXPECT_TRUE(same_traffic(r.layer->run(c), fake_collectives::traffic_of(c)));
  EXPECT_EQ(out, (v{300, 200, 201, 10}));  // blocks from 2, 1, 0
}

// --- any collective ---------------------------------------------------------------------------

TEST(fault_layer, rank0_issues_a_barrier_for_its_first_collective) {
  const counts_t counts{1, 1};
  rig<mutants::rank0_skips> r(0, 2);
  v buf{7, -1};
  (void)r.layer->run(gather_call(buf, counts));
  EXPECT_EQ(buf, (v{7, -1}));
  ASSERT_EQ(r.fake->calls.size(), 1u);
  EXPECT_EQ(r.fake->calls[0].kind, collective::barrier);
  (void)r.layer->run(gather_call(buf, counts));  // later calls pass
  EXPECT_EQ(buf, (v{7, 200}));
  EXPECT_EQ(r.log->acts, 1);
  rig<mutants::rank0_skips> other(1, 2);
  v theirs{-1, 8};
  (void)other.layer->run(gather_call(theirs, counts));
  EXPECT_EQ(other.fake->calls[0].kind, collective::all_gather);
  EXPECT_EQ(other.log->acts, 0);
}

TEST(fault_layer, extra_barrier_comes_once_before_the_first_collective) {
  rig<mutants::extra_barrier> r(1, 2);
  v a{1}, b{2};
  (void)r.layer->run(reduce_call(a));
  (void)r.layer->run(reduce_call(b));
  ASSERT_EQ(r.fake->calls.size(), 3u);
  EXPECT_EQ(r.fake->calls[0].kind, collective::barrier);
  EXPECT_EQ(r.fake->calls[1].kind, collective::all_reduce);
  EXPECT_EQ(r.fake->calls[2].kind, collective::all_reduce);
  EXPECT_EQ(a[0], 1 + fake_collectives::value(0, 0));
}

// --- started collectives ----------------------------------------------------------------------

TEST(fault_layer, started_gather_ends_without_the_successors_part) {
  const counts_t counts{1, 1, 1};
  rig<mutants::started_early> r(0, 3);
  v buf{7, -1, -1};
  const call c = gather_call(buf, counts);
  r.layer->start(c);
  EXPECT_TRUE(r.layer->test());
  EXPECT_TRUE(same_traffic(r.layer->wait(), fake_collectives::traffic_of(c)));
  EXPECT_EQ(buf, (v{7, 0, 300}));  // rank 1's part never arrived: zeros
  // A blocking all-gather passes.
  v whole{7, -1, -1};
  (void)r.layer->run(gather_call(whole, counts));
  EXPECT_EQ(whole, (v{7, 200, 300}));
}

TEST(fault_layer, started_reductions_are_skipped) {
  rig<mutants::started_early> r(1, 2);
  v buf{1, 2};
  const call c = reduce_call(buf);
  r.layer->start(c);
  EXPECT_TRUE(same_traffic(r.layer->wait(), fake_collectives::traffic_of(c)));
  EXPECT_EQ(buf, (v{1, 2}));
  const counts_t counts{1, 2};
  const v in{5, 6, 7};
  v out(2, 0.0);
  r.layer->start(scatter_call(in, out, counts));
  (void)r.layer->wait();
  EXPECT_EQ(out, (v{6, 7}));  // its own partial of part 1
  EXPECT_EQ(r.log->acts, 2);
  EXPECT_TRUE(same_traffic(r.layer->wait(), {}));  // nothing pending
}

// --- point-to-point ---------------------------------------------------------------------------

TEST(fault_layer, lagged_send_delivers_the_previous_payload) {
  rig<mutants::p2p_lagged> r(0, 3);
  const auto send = [&](v data, int peer, int tag) {
    MPI_Request q = r.layer->send(
        par::message{dtype::f64, data.data(), static_cast<std::int64_t>(data.size()), peer, tag});
    r.layer->wait_send(q);
  };
  send({1, 1}, 1, 0);
  send({2, 2}, 1, 1);
  send({3, 3, 3}, 1, 2);  // another size: its own
  send({4, 4}, 1, 3);
  send({5, 5}, 2, 4);  // another peer: its own
  send({6, 6}, 1, 0);  // the next step starts again at tag 0: its own
  send({7, 7}, 1, 1);
  const auto& s = r.fake->sends;
  ASSERT_EQ(s.size(), 7u);
  EXPECT_EQ(s[0].payload, (v{1, 1}));
  EXPECT_EQ(s[1].payload, (v{1, 1}));
  EXPECT_EQ(s[2].payload, (v{3, 3, 3}));
  EXPECT_EQ(s[3].payload, (v{2, 2}));
  EXPECT_EQ(s[4].payload, (v{5, 5}));
  EXPECT_EQ(s[5].payload, (v{6, 6}));
  EXPECT_EQ(s[6].payload, (v{6, 6}));
  EXPECT_EQ(r.log->acts, 3);
}

// --- what an operator leaves alone --------------------------------------------------------------

// Each operator, given collectives it does not target, gives the bare results and traffic.
template <class L>
void passes_untargeted(collective targeted) {
  const counts_t counts{1, 2, 1};
  for (const collective k :
       {collective::all_gather, collective::all_reduce, collective::reduce_scatter,
        collective::broadcast, collective::all_to_all}) {
    if (k == targeted) continue;
    rig<L> r(1, 3);
    const v in{1, 2, 3, 4};
    v buf(4, 0.5), out(2, 0.0);
    call c = k == collective::all_gather       ? gather_call(buf, counts)
             : k == collective::all_reduce     ? reduce_call(buf)
             : k == collective::reduce_scatter ? scatter_call(in, out, counts)
             : k == collective::broadcast      ? broadcast_call(buf, 2)
                                               : a2a_call(in, counts, buf, counts);
    const v want = bare(1, 3, c, k == collective::reduce_scatter ? out : buf);
    EXPECT_TRUE(same_traffic(r.layer->run(c), fake_collectives::traffic_of(c)));
    EXPECT_EQ(k == collective::reduce_scatter ? out : buf, want) << par::to_string(k);
    EXPECT_EQ(r.log->acts, 0) << par::to_string(k);
  }
}

TEST(fault_layer, leaves_untargeted_collectives_alone) {
  passes_untargeted<mutants::ag_drop_last>(collective::all_gather);
  passes_untargeted<mutants::ag_ring_short>(collective::all_gather);
  passes_untargeted<mutants::ag_reversed>(collective::all_gather);
  passes_untargeted<mutants::ar_skipped>(collective::all_reduce);
  passes_untargeted<mutants::ar_scatter_only>(collective::all_reduce);
  passes_untargeted<mutants::ar_order_alternates>(collective::all_reduce);
  passes_untargeted<mutants::ar_rank_order>(collective::all_reduce);
  passes_untargeted<mutants::rs_even_offsets>(collective::reduce_scatter);
  passes_untargeted<mutants::reduce_in_bf16>(collective::all_reduce);
  passes_untargeted<mutants::bcast_wrong_root>(collective::broadcast);
  passes_untargeted<mutants::a2a_reversed>(collective::all_to_all);
  passes_untargeted<mutants::started_early>(collective::barrier);  // blocking calls all pass
  passes_untargeted<mutants::p2p_lagged>(collective::barrier);
}

// --- memory -----------------------------------------------------------------------------------

TEST(fault_layer, scratch_stays_off_the_memory_meter) {
  rig<mutants::ar_order_alternates> r(0, 4);
  r.fake->calls.reserve(16);
  v buf(4096, 1.0);
  mem::peak_scope scope;
  for (int i = 0; i < 3; ++i) (void)r.layer->run(reduce_call(buf));
  EXPECT_EQ(scope.peak(), 0u);
}

}  // namespace
}  // namespace shardcheck::prop
