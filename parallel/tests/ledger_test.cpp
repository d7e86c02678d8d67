#include <gtest/gtest.h>

#include <vector>

#include "shardcheck/parallel/ledger.hpp"

using namespace shardcheck::par;

TEST(all_reduce_entry, native_ring_moves_2n_less_two_chunks) {
  // n = 2000 on p = 3: chunks 667, 667, 666; sent 2n − c_r − c_{r+1}, received 2n − c_{r−1} − c_r.
  const std::int64_t sent[] = {2666, 2667, 2667}, received[] = {2667, 2666, 2667};
  for (int r = 0; r < 3; ++r) {
    const ledger_entry e = all_reduce_entry(backend::native, 2000, r, 3, 1);
    EXPECT_EQ(e.bytes_sent, sent[r]) << "rank " << r;
    EXPECT_EQ(e.bytes_received, received[r]) << "rank " << r;
  }
}

TEST(all_reduce_entry, native_recursive_doubling_folds_the_extra_rank) {
  // p = 3: rank 2 folds into rank 0, ranks 0 and 1 exchange once, rank 0 hands the result back.
  const std::int64_t moved[] = {20, 10, 10};
  for (int r = 0; r < 3; ++r) {
    const ledger_entry e = all_reduce_entry(backend::native, 10, r, 3, 1);
    EXPECT_EQ(e.bytes_sent, moved[r]);
    EXPECT_EQ(e.bytes_received, moved[r]);
  }
}

TEST(binomial_children, follow_the_binomial_tree) {
  // p = 5, root 0: 0→4, 0→2, 0→1, 2→3.
  const int children[] = {3, 0, 1, 0, 0};
  for (int r = 0; r < 5; ++r) EXPECT_EQ(binomial_children(r, 0, 5), children[r]);
  EXPECT_EQ(binomial_children(3, 3, 5), 3);
}

// Native bytes are real messages, so they balance over the ranks (mpi's logical payloads need not:
// a broadcast's root sends n once, p − 1 ranks receive it).
TEST(ledger_formulas, native_bytes_leaving_one_rank_arrive_at_another) {
  const std::vector<std::int64_t> counts = {5, 0, 7, 2};
  const backend b = backend::native;
  for (std::int64_t n : {0, 9, 5000, 40000}) {
    std::int64_t sent = 0, received = 0;
    for (int r = 0; r < 4; ++r) {
      for (const ledger_entry& e :
           {all_gather_entry(b, counts, r, 4), reduce_scatter_entry(b, counts, r, 4),
            broadcast_entry(b, n, 2, r, 4, 4), all_reduce_entry(b, n, r, 4, 4)}) {
        sent += e.bytes_sent;
        received += e.bytes_received;
      }
    }
    EXPECT_EQ(sent, received) << "n=" << n;
  }
}

TEST(reduction_depth, follows_the_algorithm) {
  EXPECT_EQ(reduction_depth(backend::mpi, collective::all_reduce, 4, 10), 3);
  EXPECT_EQ(reduction_depth(backend::native, collective::all_reduce, 4, 10), 2);
  EXPECT_EQ(reduction_depth(backend::native, collective::all_reduce, 5, 10), 3);
  EXPECT_EQ(reduction_depth(backend::native, collective::all_reduce, 4, 5000), 3);
  EXPECT_EQ(reduction_depth(backend::native, collective::reduce_scatter, 4, 10), 3);
  EXPECT_EQ(reduction_depth(backend::native, collective::all_reduce, 1, 10), 0);
}
