// The raw-MPI wrappers (pmpi.hpp) under mpirun: every wrapper records the entry par::comm would,
// derived communicators carry their parent's axis, shardcheck's own calls and calls outside a
// window are not recorded, and a mismatched raw collective fails on every rank.
#include <gtest/gtest.h>

#include <mpi.h>
#include "mpi_environment.hpp"

#include <numeric>
#include <string>
#include <vector>

#include "shardcheck/parallel/comm.hpp"
#include "shardcheck/parallel/ledger.hpp"
#include "shardcheck/parallel/pmpi.hpp"

using namespace shardcheck;
using namespace shardcheck::par;

namespace {
// A duplicate of MPI_COMM_WORLD recorded as axis 1, its rank and size.
struct fixture {
  comm_handle h;
  int me = 0, p = 1;
  ledger log;
  fixture() {
    test::need_mpi();
    MPI_Comm c = MPI_COMM_NULL;
    PMPI_Comm_dup(MPI_COMM_WORLD, &c);
    h = comm_handle(c);
    me = h.rank();
    p = h.size();
  }
  [[nodiscard]] std::vector<pmpi::tracked_comm> tracked() const { return {{h.native_handle(), 1}}; }
  [[nodiscard]] MPI_Comm c() const { return h.native_handle(); }
};

ledger_entry on_axis(ledger_entry e, int axis) {
  e.axis = axis;
  return e;
}
}  // namespace

TEST(pmpi, the_wrappers_are_linked) { EXPECT_TRUE(pmpi::linked()); }

TEST(pmpi, every_collective_records_what_comm_would) {
  fixture f;
  const int p = f.p, me = f.me;
  std::vector<std::int64_t> v(static_cast<std::size_t>(p));
  std::iota(v.begin(), v.end(), 0);  // uneven counts 0, 1, 2, …
  std::vector<int> counts(v.begin(), v.end()), displs(counts.size());
  std::exclusive_scan(counts.begin(), counts.end(), displs.begin(), 0);
  const int total = std::accumulate(counts.begin(), counts.end(), 0);
  std::vector<double> big(static_cast<std::size_t>(p * p + 4 * p + total + 8), 1.0);
  std::vector<float> small(big.size(), 1.0f);
  std::vector<ledger_entry> want;
  {
    const pmpi::recording rec(f.log, true, f.tracked());
    MPI_Allreduce(MPI_IN_PLACE, big.data(), 5, MPI_DOUBLE, MPI_SUM, f.c());
    want.push_back(all_reduce_entry(backend::mpi, 5, me, p, 8));
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, small.data(), 2, MPI_FLOAT, f.c());
    want.push_back(all_gather_entry(backend::mpi, std::vector<std::int64_t>(v.size(), 2), me, 4));
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, big.data(), counts.data(), displs.data(),
                   MPI_DOUBLE, f.c());
    want.push_back(all_gather_entry(backend::mpi, v, me, 8));
    MPI_Reduce_scatter(big.data(), big.data() + total, counts.data(), MPI_DOUBLE, MPI_SUM, f.c());
    want.push_back(reduce_scatter_entry(backend::mpi, v, me, 8));
    MPI_Reduce_scatter_block(small.data(), small.data() + 3 * p, 3, MPI_FLOAT, MPI_SUM, f.c());
    want.push_back(
        reduce_scatter_entry(backend::mpi, std::vector<std::int64_t>(v.size(), 3), me, 4));
    MPI_Bcast(big.data(), 7, MPI_DOUBLE, p - 1, f.c());
    want.push_back(broadcast_entry(backend::mpi, 7, p - 1, me, p, 8));
    // A rooted reduction (BLACS's combine): the root receives (p − 1) · 5 elements.
    MPI_Reduce(me == 0 ? MPI_IN_PLACE : big.data(), big.data(), 5, MPI_DOUBLE, MPI_SUM, 0, f.c());
    want.push_back(reduce_entry(5, 0, me, p, 8));
    MPI_Alltoall(big.data(), 2, MPI_DOUBLE, big.data() + 2 * p, 2, MPI_DOUBLE, f.c());
    const std::vector<std::int64_t> twos(v.size(), 2);
    want.push_back(all_to_all_entry(backend::mpi, twos, twos, me, 8));
    // Rank q sends q elements to every rank: receives follow the counts 0, 1, 2, ….
    std::vector<int> sends(counts.size(), me), sdispls(counts.size());
    std::exclusive_scan(sends.begin(), sends.end(), sdispls.begin(), 0);
    MPI_Alltoallv(big.data(), sends.data(), sdispls.data(), MPI_DOUBLE, big.data() + me * p,
                  counts.data(), displs.data(), MPI_DOUBLE, f.c());
    want.push_back(
        all_to_all_entry(backend::mpi, std::vector<std::int64_t>(v.size(), me), v, me, 8));
    MPI_Barrier(f.c());
    want.push_back(ledger_entry{.kind = collective::barrier});
    // The started forms, recorded when they start.
    MPI_Request r[4];
    MPI_Iallreduce(MPI_IN_PLACE, big.data(), 3, MPI_DOUBLE, MPI_SUM, f.c(), &r[0]);
    MPI_Wait(&r[0], MPI_STATUS_IGNORE);
    want.push_back(all_reduce_entry(backend::mpi, 3, me, p, 8));
    MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, big.data(), counts.data(), displs.data(),
                    MPI_DOUBLE, f.c(), &r[0]);
    MPI_Wait(&r[0], MPI_STATUS_IGNORE);
    want.push_back(all_gather_entry(backend::mpi, v, me, 8));
    MPI_Ibcast(small.data(), 4, MPI_FLOAT, 0, f.c(), &r[0]);
    MPI_Wait(&r[0], MPI_STATUS_IGNORE);
    want.push_back(broadcast_entry(backend::mpi, 4, 0, me, p, 4));
    MPI_Ibarrier(f.c(), &r[0]);
    MPI_Wait(&r[0], MPI_STATUS_IGNORE);
    want.push_back(ledger_entry{.kind = collective::barrier});
    // Point-to-point round a ring: to me + 1, from me − 1.
    const int next = (me + 1) % p, prev = (me + p - 1) % p;
    MPI_Sendrecv(big.data(), 3, MPI_DOUBLE, next, 5, big.data() + 3, 3, MPI_DOUBLE, prev, 5, f.c(),
                 MPI_STATUS_IGNORE);
    want.push_back(send_entry(3, next, 8));
    want.push_back(recv_entry(3, prev, 8));
    MPI_Irecv(small.data(), 2, MPI_FLOAT, MPI_ANY_SOURCE, 6, f.c(), &r[0]);
    MPI_Isend(small.data() + 2, 2, MPI_FLOAT, next, 6, f.c(), &r[1]);
    MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
    want.push_back(recv_entry(2, MPI_ANY_SOURCE, 4));
    want.push_back(send_entry(2, next, 4));
    if (me != 0) MPI_Send(small.data(), 1, MPI_FLOAT, 0, 7, f.c());
    for (int q = 1; me == 0 && q < p; ++q)
      MPI_Recv(small.data(), 1, MPI_FLOAT, MPI_ANY_SOURCE, 7, f.c(), MPI_STATUS_IGNORE);
    if (me != 0) want.push_back(send_entry(1, 0, 4));
  }
  std::vector<ledger_entry> got = f.log.entries();
  // Rank 0's receives from any source: recorded with the rank that matched, in arrival order.
  if (me == 0) {
    ASSERT_EQ(got.size(), want.size() + static_cast<std::size_t>(p - 1));
    std::vector<bool> seen(static_cast<std::size_t>(p), false);
    for (std::size_t i = want.size(); i < got.size(); ++i) {
      ASSERT_EQ(got[i].kind, collective::recv);
      ASSERT_GT(got[i].root, 0);
      seen[static_cast<std::size_t>(got[i].root)] = true;
      EXPECT_EQ(got[i], on_axis(recv_entry(1, got[i].root, 4), 1));
    }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), true), p - 1);
    got.resize(want.size());
  }
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(to_string(got[i]), to_string(on_axis(want[i], 1))) << "entry " << i;
}

TEST(pmpi, derived_communicators_record_with_their_parents_axis) {
  fixture f;
  double x = 1;
  {
    const pmpi::recording rec(f.log, true, f.tracked());
    MPI_Comm dup = MPI_COMM_NULL, split = MPI_COMM_NULL, created = MPI_COMM_NULL,
             cart = MPI_COMM_NULL, sub = MPI_COMM_NULL;
    MPI_Comm_dup(f.c(), &dup);
    MPI_Comm_split(dup, f.me % 2, f.me, &split);  // derived from a derived one
    MPI_Group g = MPI_GROUP_NULL;
    MPI_Comm_group(f.c(), &g);
    MPI_Comm_create(f.c(), g, &created);
    MPI_Group_free(&g);
    const int dims[1] = {f.p}, periods[1] = {0}, keep[1] = {1};
    MPI_Cart_create(f.c(), 1, dims, periods, 0, &cart);
    MPI_Cart_sub(cart, keep, &sub);
    for (MPI_Comm c : {dup, split, created, cart, sub})
      MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_SUM, c);
    for (MPI_Comm* c : {&sub, &cart, &created, &split, &dup}) MPI_Comm_free(c);
  }
  ASSERT_EQ(f.log.entries().size(), 5u);
  for (const ledger_entry& e : f.log.entries()) EXPECT_EQ(e.axis, 1) << to_string(e);
  // The split comm holds the ranks of one parity: its size is in the entry's bytes.
  int split_size = (f.p + (f.me % 2 == 0 ? 1 : 0)) / 2;
  EXPECT_EQ(f.log.entries()[1],
            on_axis(all_reduce_entry(backend::mpi, 1, f.me / 2, split_size, 8), 1));
}

TEST(pmpi, shardcheck_calls_and_calls_outside_a_window_are_not_recorded) {
  fixture f;
  double x = 1;
  MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_SUM, f.c());  // no window
  {
    const pmpi::recording rec(f.log, true, f.tracked());
    {
      const pmpi::internal own;
      MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_SUM, f.c());
    }
    // Not tracked, and not a mesh communicator's ranks.
    if (f.p > 1) MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_SELF);
  }
  MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_SUM, f.c());  // closed again
  EXPECT_TRUE(f.log.entries().empty());
}

// par::comm's own MPI calls (the checker's fingerprint, Open MPI's all-reduce) stay out: the
// checker records the call once.
TEST(pmpi, a_checked_comm_on_a_tracked_handle_records_once) {
  fixture f;
  MPI_Comm c = MPI_COMM_NULL;
  PMPI_Comm_dup(MPI_COMM_WORLD, &c);
  comm k(comm_handle(c), {}, 0);
  k.attach(&f.log, true);
  std::vector<double> v(6, 1.0);
  {
    const pmpi::tracked_comm t{k.native_handle(), 0};
    const pmpi::recording rec(f.log, true, std::span(&t, 1));
    k.all_reduce_sum<double>(v);
    k.barrier();
  }
  k.attach(nullptr, false);
  ASSERT_EQ(f.log.entries().size(), 2u);
  EXPECT_EQ(f.log.entries()[0], all_reduce_entry(backend::mpi, 6, f.me, f.p, 8));
}

// A rank issuing a different raw collective fails on every rank, before the call could hang.
TEST(pmpi, a_mismatched_raw_collective_fails_on_every_rank) {
  fixture f;
  if (f.p == 1) GTEST_SKIP() << "needs two ranks";
  double x[2] = {1, 1};
  std::string message;
  try {
    const pmpi::recording rec(f.log, true, f.tracked());
    MPI_Allreduce(MPI_IN_PLACE, x, f.me == 0 ? 2 : 1, MPI_DOUBLE, MPI_SUM, f.c());
  } catch (const mpi_error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("collective mismatch"), std::string::npos) << message;
  // Every rank's call at that index, rank 0 the one out of step when the others agree.
  EXPECT_NE(message.find("rank 0 all_reduce, count 2"), std::string::npos) << message;
  if (f.p >= 3) {
    EXPECT_NE(message.find("; out of step: rank 0 "), std::string::npos) << message;
  }
  EXPECT_TRUE(f.log.entries().empty());
}

// Every one-sided call on a window over a recorded communicator: origin, target and bytes.
// (Open MPI 4.1 has no one-sided component for MPI_Win_create and _create_dynamic on one rank,
// and its compare-and-swap crashes on a window of MPI_Win_allocate: those run from two ranks up,
// the compare-and-swap on a created window.)
TEST(pmpi, one_sided_calls_record_origin_target_and_bytes) {
  fixture f;
  const int p = f.p, me = f.me, next = (me + 1) % p, prev = (me + p - 1) % p;
  std::vector<double> mine(8, 1.0), buffer(16, 2.0), result(8, 0.0);
  std::vector<ledger_entry> want;
  {
    const pmpi::recording rec(f.log, true, f.tracked());
    double* base = nullptr;
    MPI_Win win = MPI_WIN_NULL, created = MPI_WIN_NULL, dynamic = MPI_WIN_NULL,
            shared = MPI_WIN_NULL;
    MPI_Win_allocate(8 * sizeof(double), sizeof(double), MPI_INFO_NULL, f.c(), &base, &win);
    want.push_back(win_create_entry(64));
    if (p > 1) {
      MPI_Win_create_dynamic(MPI_INFO_NULL, f.c(), &dynamic);
      want.push_back(win_create_entry(0));
    }
    float* shared_base = nullptr;
    MPI_Win_allocate_shared(4 * sizeof(float), sizeof(float), MPI_INFO_NULL, f.c(), &shared_base,
                            &shared);
    want.push_back(win_create_entry(16));
    MPI_Win_fence(0, win);
    want.push_back(win_sync_entry(collective::win_fence));
    MPI_Put(mine.data(), 3, MPI_DOUBLE, next, 0, 3, MPI_DOUBLE, win);
    want.push_back(put_entry(3, next, 8));
    MPI_Get(result.data(), 2, MPI_DOUBLE, prev, 4, 2, MPI_DOUBLE, win);
    want.push_back(get_entry(2, prev, 8));
    MPI_Accumulate(mine.data(), 4, MPI_DOUBLE, next, 4, 4, MPI_DOUBLE, MPI_SUM, win);
    want.push_back(accumulate_entry(4, next, 8));
    MPI_Win_fence(0, win);
    want.push_back(win_sync_entry(collective::win_fence));
    MPI_Win_lock(MPI_LOCK_SHARED, next, 0, win);
    want.push_back(win_sync_entry(collective::win_lock, next));
    MPI_Get_accumulate(mine.data(), 2, MPI_DOUBLE, result.data(), 2, MPI_DOUBLE, next, 0, 2,
                       MPI_DOUBLE, MPI_SUM, win);
    want.push_back(get_accumulate_entry(2, next, 8, 16));
    MPI_Fetch_and_op(mine.data(), result.data(), MPI_DOUBLE, next, 6, MPI_SUM, win);
    want.push_back(fetch_and_op_entry(next, 8));
    MPI_Win_flush(next, win);
    want.push_back(win_sync_entry(collective::win_flush, next));
    MPI_Win_flush_local(next, win);
    want.push_back(win_sync_entry(collective::win_flush_local, next));
    MPI_Win_unlock(next, win);
    want.push_back(win_sync_entry(collective::win_unlock, next));
    MPI_Win_lock_all(0, win);
    want.push_back(win_sync_entry(collective::win_lock_all));
    MPI_Request r[4];
    MPI_Rput(mine.data(), 1, MPI_DOUBLE, prev, 0, 1, MPI_DOUBLE, win, &r[0]);
    want.push_back(put_entry(1, prev, 8));
    MPI_Rget(result.data(), 5, MPI_DOUBLE, prev, 1, 5, MPI_DOUBLE, win, &r[1]);
    want.push_back(get_entry(5, prev, 8));
    MPI_Raccumulate(mine.data(), 2, MPI_DOUBLE, next, 0, 2, MPI_DOUBLE, MPI_SUM, win, &r[2]);
    want.push_back(accumulate_entry(2, next, 8));
    MPI_Rget_accumulate(mine.data(), 1, MPI_DOUBLE, result.data() + 6, 1, MPI_DOUBLE, next, 3, 1,
                        MPI_DOUBLE, MPI_SUM, win, &r[3]);
    want.push_back(get_accumulate_entry(1, next, 8, 8));
    MPI_Waitall(4, r, MPI_STATUSES_IGNORE);
    MPI_Win_flush_all(win);
    want.push_back(win_sync_entry(collective::win_flush_all));
    MPI_Win_flush_local_all(win);
    want.push_back(win_sync_entry(collective::win_flush_local_all));
    MPI_Win_unlock_all(win);
    want.push_back(win_sync_entry(collective::win_unlock_all));
    // Post-start-complete-wait with every rank of the window, this one included.
    MPI_Group all = MPI_GROUP_NULL;
    MPI_Win_get_group(win, &all);
    MPI_Win_post(all, 0, win);
    want.push_back(win_sync_entry(collective::win_post, -1, p));
    MPI_Win_start(all, 0, win);
    want.push_back(win_sync_entry(collective::win_start, -1, p));
    MPI_Put(mine.data(), 2, MPI_DOUBLE, next, 2, 2, MPI_DOUBLE, win);
    want.push_back(put_entry(2, next, 8));
    MPI_Win_complete(win);
    want.push_back(win_sync_entry(collective::win_complete));
    MPI_Win_wait(win);
    want.push_back(win_sync_entry(collective::win_wait));
    MPI_Group_free(&all);
    if (p > 1) {
      MPI_Win_create(buffer.data(), 16 * sizeof(double), sizeof(double), MPI_INFO_NULL, f.c(),
                     &created);
      want.push_back(win_create_entry(128));
      const long long swap = 1, compare = 0;
      long long old = 0;
      MPI_Win_lock(MPI_LOCK_EXCLUSIVE, next, 0, created);
      want.push_back(win_sync_entry(collective::win_lock, next));
      MPI_Compare_and_swap(&swap, &compare, &old, MPI_LONG_LONG, next, 7, created);
      want.push_back(compare_and_swap_entry(next, 8));
      MPI_Win_unlock(next, created);
      want.push_back(win_sync_entry(collective::win_unlock, next));
      MPI_Win_free(&created);
      want.push_back(win_sync_entry(collective::win_free));
    }
    for (MPI_Win* w : {&shared, &dynamic, &win}) {
      if (*w == MPI_WIN_NULL) continue;
      MPI_Win_free(w);
      want.push_back(win_sync_entry(collective::win_free));
    }
  }
  const std::vector<ledger_entry>& got = f.log.entries();
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(to_string(got[i]), to_string(on_axis(want[i], 1))) << "entry " << i;
  // The bytes: 3 doubles put; the get-accumulate's 2 doubles sent and 2 received.
  const std::size_t put = p > 1 ? 4 : 3, get_accumulate = put + 5;
  EXPECT_NE(
      to_string(got[put]).find("put axis=1 elements=3 elem_bytes=8 sent=24 received=0 target="),
      std::string::npos)
      << to_string(got[put]);
  EXPECT_NE(to_string(got[get_accumulate]).find("sent=16 received=16"), std::string::npos)
      << to_string(got[get_accumulate]);
}

// A window's ranks are reported in the mesh communicator's numbers: a window on a communicator
// that numbers the axis's ranks backwards puts to its rank 0, the axis's rank p − 1.
TEST(pmpi, one_sided_targets_are_the_axis_communicators_ranks) {
  fixture f;
  const int p = f.p;
  double x[2] = {1, 2};
  {
    const pmpi::recording rec(f.log, true, f.tracked());
    MPI_Comm backwards = MPI_COMM_NULL;
    MPI_Comm_split(f.c(), 0, p - 1 - f.me, &backwards);
    MPI_Win win = MPI_WIN_NULL;
    double* base = nullptr;
    MPI_Win_allocate(2 * sizeof(double), sizeof(double), MPI_INFO_NULL, backwards, &base, &win);
    MPI_Comm_free(&backwards);  // the window goes on recording without it
    MPI_Win_lock_all(0, win);
    MPI_Put(x, 2, MPI_DOUBLE, 0, 0, 2, MPI_DOUBLE, win);
    MPI_Win_unlock_all(win);
    MPI_Win_fence(0, win);
    MPI_Win_free(&win);
  }
  const std::vector<ledger_entry>& got = f.log.entries();
  ASSERT_EQ(got.size(), 6u);
  EXPECT_EQ(got[2], on_axis(put_entry(2, p - 1, 8), 1));
  EXPECT_EQ(got[4], on_axis(win_sync_entry(collective::win_fence), 1));
}

// A rank that skips a fence and goes on to a collective on the window's communicator: every rank
// fails "collective mismatch" at once, instead of hanging.
TEST(pmpi, a_skipped_fence_fails_on_every_rank) {
  fixture f;
  if (f.p == 1) GTEST_SKIP() << "needs two ranks";
  double* base = nullptr;
  MPI_Win win = MPI_WIN_NULL;
  std::string message;
  try {
    const pmpi::recording rec(f.log, true, f.tracked());
    MPI_Win_allocate(sizeof(double), sizeof(double), MPI_INFO_NULL, f.c(), &base, &win);
    if (f.me != 0) MPI_Win_fence(0, win);
    MPI_Barrier(f.c());
  } catch (const mpi_error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("collective mismatch"), std::string::npos) << message;
  MPI_Win_free(&win);
}

// Communicators a kernel derives, or a library made before, record as the mesh axis with the
// same ranks. Here a 2-axis mesh: the whole (−1), axis 0 the ranks of one parity, axis 1 the
// pairs {2i, 2i + 1}.
TEST(pmpi, communicators_with_an_axis_ranks_record_as_that_axis) {
  fixture f;
  const int p = f.p, me = f.me;
  MPI_Comm parity = MPI_COMM_NULL, pair = MPI_COMM_NULL, library = MPI_COMM_NULL,
           lonely = MPI_COMM_NULL;
  PMPI_Comm_split(f.c(), me % 2, me, &parity);
  PMPI_Comm_split(f.c(), me / 2, me, &pair);
  PMPI_Comm_dup(f.c(), &library);  // made outside the window
  PMPI_Comm_split(f.c(), me == 0 ? 0 : 1, me, &lonely);
  const std::vector<pmpi::tracked_comm> mesh{{f.c(), -1}, {parity, 0}, {pair, 1}};
  // The first axis whose ranks are all of them, else the whole mesh.
  const int whole = p == 1 ? 0 : p == 2 ? 1 : -1;
  double x = 1;
  {
    const pmpi::recording rec(f.log, true, mesh);
    MPI_Comm dup = MPI_COMM_NULL, by_parity = MPI_COMM_NULL, half = MPI_COMM_NULL;
    MPI_Comm_dup(f.c(), &dup);
    MPI_Comm_split(f.c(), me % 2, -me, &by_parity);  // axis 0's ranks, numbered backwards
    // Of axis 0, matching no axis at p = 4 (singletons): recorded as axis 0, its parent's.
    MPI_Comm_split(parity, me < 2 ? 0 : 1, me, &half);
    for (MPI_Comm c : {dup, by_parity, p == 4 ? half : by_parity, library})
      MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_SUM, c);
    // A broadcast from rank 0 of by_parity: the last of this parity, in axis 0's numbers.
    MPI_Bcast(&x, 1, MPI_DOUBLE, 0, by_parity);
    if (p > 2) MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_SUM, lonely);  // not recorded
    for (MPI_Comm* c : {&half, &by_parity, &dup}) MPI_Comm_free(c);
  }
  const std::vector<ledger_entry>& got = f.log.entries();
  ASSERT_EQ(got.size(), 5u);
  EXPECT_EQ(got[0].axis, whole);
  EXPECT_EQ(got[1].axis, 0);
  EXPECT_EQ(got[2].axis, 0);
  EXPECT_EQ(got[3].axis, whole);
  int parity_size = 0;
  PMPI_Comm_size(parity, &parity_size);
  EXPECT_EQ(got[4].axis, 0);
  EXPECT_EQ(got[4].root, parity_size - 1);
  for (MPI_Comm* c : {&lonely, &library, &pair, &parity}) PMPI_Comm_free(c);
}
