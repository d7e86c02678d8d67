#include <gtest/gtest.h>

#include <mpi.h>
#include "mpi_environment.hpp"

#include <memory>
#include <utility>
#include <vector>

#include "shardcheck/parallel/comm.hpp"
#include "shardcheck/parallel/ledger.hpp"

using namespace shardcheck;
using namespace shardcheck::par;

namespace {
[[nodiscard]] MPI_Comm duplicate_world() {
  MPI_Comm c = MPI_COMM_NULL;
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &c), "MPI_Comm_dup");
  return c;
}
}  // namespace

TEST(comm_handle, move_leaves_the_source_empty) {
  test::need_mpi();
  comm_handle a(duplicate_world());
  const MPI_Comm raw = a.native_handle();
  ASSERT_TRUE(a.valid());
  comm_handle b = std::move(a);
  EXPECT_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): what the test is about
  EXPECT_EQ(a.native_handle(), MPI_COMM_NULL);
  EXPECT_EQ(b.native_handle(), raw);
  comm_handle c;
  EXPECT_FALSE(c.valid());
  c = std::move(b);
  EXPECT_FALSE(b.valid());  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(c.native_handle(), raw);
  { comm_handle gone = std::move(a); }  // an empty handle frees nothing
  int size = 0;
  EXPECT_EQ(MPI_Comm_size(c.native_handle(), &size), MPI_SUCCESS);
  EXPECT_EQ(c.size(), size);
}

TEST(comm_handle, never_frees_world_or_self) {
  test::need_mpi();
  {
    const comm_handle world = comm_handle::world();
    const comm_handle self = comm_handle::self();
    EXPECT_EQ(world.native_handle(), MPI_COMM_WORLD);
    EXPECT_EQ(self.native_handle(), MPI_COMM_SELF);
    EXPECT_EQ(self.size(), 1);
  }
  int size = 0, rank = -1;
  EXPECT_EQ(MPI_Comm_size(MPI_COMM_WORLD, &size), MPI_SUCCESS);
  EXPECT_EQ(MPI_Comm_rank(MPI_COMM_SELF, &rank), MPI_SUCCESS);
  EXPECT_EQ(rank, 0);
  EXPECT_EQ(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);
}

namespace {
// Passes every call on, noting its kind first.
class counting final : public collectives {
 public:
  counting(std::unique_ptr<collectives> inner, std::vector<collective>& seen)
      : inner_(std::move(inner)), seen_(seen) {}
  [[nodiscard]] int rank() const override { return inner_->rank(); }
  [[nodiscard]] int size() const override { return inner_->size(); }
  [[nodiscard]] MPI_Comm native_handle() const override { return inner_->native_handle(); }
  traffic run(const call& c) override {
    seen_.push_back(c.kind);
    return inner_->run(c);
  }
  void start(const call& c) override {
    seen_.push_back(c.kind);
    inner_->start(c);
  }
  bool test() override { return inner_->test(); }
  traffic wait() override { return inner_->wait(); }
  [[nodiscard]] MPI_Request send(const message& m) override {
    seen_.push_back(collective::send);
    return inner_->send(m);
  }
  void wait_send(MPI_Request& r) override { inner_->wait_send(r); }
  std::int64_t recv(const message& m) override {
    seen_.push_back(collective::recv);
    return inner_->recv(m);
  }

 private:
  std::unique_ptr<collectives> inner_;
  std::vector<collective>& seen_;
};

// One call of each kind on c, blocking, started and point-to-point (to itself).
void every_call(comm& c) {
  const auto p = static_cast<std::size_t>(c.size());
  const std::vector<std::int64_t> ones(p, 1);
  std::vector<double> buffer(p, 1.0), in(p, 1.0), one(1, 1.0);
  c.all_gather<double>(buffer, ones);
  c.all_reduce_sum<double>(buffer);
  c.reduce_scatter_sum<double>(in, one, ones);
  c.broadcast<double>(buffer, 0);
  c.all_to_all<double>(in, ones, buffer, ones);
  c.barrier();
  c.start_all_reduce_sum<double>(buffer);
  while (!c.test_pending()) {
  }
  c.wait_pending();
  c.start_broadcast<double>(buffer, 0);
  c.wait_pending();
  MPI_Request r = c.start_send<double>(in, c.rank(), 3);
  EXPECT_EQ(c.recv<double>(buffer, c.rank(), 3), static_cast<std::int64_t>(p));
  c.wait_send(r);
}
}  // namespace

TEST(collectives, a_decorator_sees_every_call_above_or_below_the_checker) {
  test::need_mpi();
  const std::vector<collective> want = {collective::all_gather,     collective::all_reduce,
                                        collective::reduce_scatter, collective::broadcast,
                                        collective::all_to_all,     collective::barrier,
                                        collective::all_reduce,     collective::broadcast,
                                        collective::send,           collective::recv};
  for (backend b : {backend::mpi, backend::native})
    for (layer_position at : {layer_position::above, layer_position::below}) {
      std::vector<collective> seen;
      std::vector<std::pair<layer_position, int>> offered;
      stack_options o{b,
                      [&](std::unique_ptr<collectives> inner, layer_position where,
                          int axis) -> std::unique_ptr<collectives> {
                        offered.emplace_back(where, axis);
                        if (where != at) return inner;
                        return std::make_unique<counting>(std::move(inner), seen);
                      }};
      comm c(comm_handle(duplicate_world()), o, 2);
      // Each position is offered once, for the comm's axis.
      ASSERT_EQ(offered.size(), 2u);
      EXPECT_NE(offered[0].first, offered[1].first);
      EXPECT_EQ(offered[0].second, 2);
      EXPECT_EQ(offered[1].second, 2);
      ledger log;
      c.attach(&log, true);
      every_call(c);
      EXPECT_EQ(seen, want) << to_string(b) << (at == layer_position::above ? " above" : " below");
      // The checker still records every call.
      ASSERT_EQ(log.entries().size(), want.size());
      for (std::size_t i = 0; i < want.size(); ++i) EXPECT_EQ(log.entries()[i].kind, want[i]);
    }
}

TEST(entry_of, matches_the_entry_formulas) {
  const std::vector<std::int64_t> counts{2, 0, 3}, recv_counts{4, 0, 1};
  for (backend b : {backend::mpi, backend::native})
    for (dtype t : {dtype::f32, dtype::f64})
      for (int r = 0; r < 3; ++r) {
        const std::size_t s = size_of(t);
        struct expectation {
          call c;
          ledger_entry e;
        };
        const auto make = [t](collective kind, std::int64_t count,
                              std::span<const std::int64_t> parts = {}) {
          call c;
          c.kind = kind;
          c.type = t;
          c.count = count;
          c.counts = parts;
          return c;
        };
        const call gather = make(collective::all_gather, 5, counts);
        const call reduce = make(collective::all_reduce, 10);
        const call scatter = make(collective::reduce_scatter, counts[std::size_t(r)], counts);
        call broadcast = make(collective::broadcast, 7);
        broadcast.root = 2;
        call exchange = make(collective::all_to_all, 5, counts);
        exchange.recv_counts = recv_counts;
        const expectation cases[] = {
            {gather, all_gather_entry(b, counts, r, s)},
            {reduce, all_reduce_entry(b, 10, r, 3, s)},
            {scatter, reduce_scatter_entry(b, counts, r, s)},
            {broadcast, broadcast_entry(b, 7, 2, r, 3, s)},
            {exchange, all_to_all_entry(b, counts, recv_counts, r, s)},
        };
        for (const expectation& x : cases)
          EXPECT_EQ(entry_of(x.c, r, 3, traffic{x.e.bytes_sent, x.e.bytes_received}), x.e)
              << to_string(x.c.kind) << " on rank " << r << ", " << to_string(b) << ", "
              << to_string(t);
      }
}

TEST(comm, reports_a_wrong_sized_message_without_failing) {
  test::need_mpi();
  comm self(comm_handle::self());
  const double out[3] = {1, 2, 3};
  double in[2] = {0, 0};
  MPI_Request r = self.start_send<double>(out, 0, 5);
  EXPECT_EQ(self.recv<double>(in, 0, 5), 3);  // 3 elements into 2: reported as 2 + 1
  self.wait_send(r);
  r = self.start_send<double>(std::span<const double>(out, 1), 0, 6);
  EXPECT_EQ(self.recv<double>(in, 0, 6), 1);
  self.wait_send(r);
  EXPECT_EQ(in[0], 1);
  EXPECT_THROW((void)self.start_send<double>(out, 1, 0), invalid_problem);  // no rank 1
  EXPECT_THROW((void)self.recv<double>(in, 0, comm::max_p2p_tag), invalid_problem);
}

// A mismatch's message: every rank's call at that index, the ranks out of step named.
TEST(collective_mismatch_text, names_every_call_and_the_ranks_out_of_step) {
  const auto ar = static_cast<long long>(collective::all_reduce),
             bc = static_cast<long long>(collective::broadcast);
  // Rank 2 of 4 broadcasts from root 1 while the others all-reduce 16 doubles.
  const std::vector<long long> calls{ar, 16, -1, 8, ar, 16, -1, 8, bc, 16, 1, 8, ar, 16, -1, 8};
  EXPECT_EQ(collective_mismatch_text(calls, 3, 0),
            "collective mismatch: the ranks of a communicator of size 4 disagree at collective "
            "#3: ranks 0, 1, 3 all_reduce, count 16; rank 2 broadcast, count 16, root 1; out of "
            "step: rank 2 (this rank: 0)");
  // Two ranks, two calls: no majority; element sizes shown where they differ.
  const std::vector<long long> two{ar, 4, -1, 8, ar, 4, -1, 4};
  EXPECT_EQ(collective_mismatch_text(two, 0, 1),
            "collective mismatch: the ranks of a communicator of size 2 disagree at collective "
            "#0: rank 0 all_reduce, count 4, 8-byte elements; rank 1 all_reduce, count 4, 4-byte "
            "elements (no call most ranks made: any of them may be out of step) (this rank: 1)");
}
