#include <gtest/gtest.h>

#include <vector>

#include "shardcheck/parallel/ledger.hpp"
#include "shardcheck/reference/types.hpp"

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

namespace {
backend_spec tree_all_reduce() { return parse_backend_spec("native:all_reduce=tree"); }
}  // namespace

TEST(all_reduce_entry, native_tree_moves_n_per_tree_edge) {
  // p = 4: rank 0's children 1 and 2, rank 2's child 3; (children + has parent)·n both ways.
  const std::int64_t moved[] = {20, 10, 20, 10};
  for (int r = 0; r < 4; ++r) {
    const ledger_entry e = all_reduce_entry(tree_all_reduce(), 10, r, 4, 1);
    EXPECT_EQ(e.bytes_sent, moved[r]) << "rank " << r;
    EXPECT_EQ(e.bytes_received, moved[r]) << "rank " << r;
  }
  // At p = 4 the ring's bytes differ (the ledger tells the two apart); at p = 2 they do not.
  EXPECT_NE(all_reduce_entry(backend::native, 5000, 0, 4, 1),
            all_reduce_entry(tree_all_reduce(), 5000, 0, 4, 1));
  EXPECT_EQ(all_reduce_entry(backend::native, 5000, 1, 2, 1),
            all_reduce_entry(tree_all_reduce(), 5000, 1, 2, 1));
  // The mpi backend takes no choices; its formulas stay the logical payload.
  EXPECT_EQ(algorithm_of(tree_all_reduce(), collective::all_reduce, 4, 10), algorithm::tree);
  EXPECT_EQ(algorithm_of(tree_all_reduce(), collective::all_reduce, 4, 5000), algorithm::tree);
  EXPECT_EQ(algorithm_of(tree_all_reduce(), collective::broadcast, 4, 5000),
            algorithm_of(backend::native, collective::broadcast, 4, 5000));
}

TEST(reduction_depth, of_the_tree_is_ceil_log2_p) {
  const backend_spec t = tree_all_reduce();
  const int p[] = {1, 2, 3, 4, 5, 8, 9, 16};
  const std::int64_t depth[] = {0, 1, 2, 2, 3, 3, 4, 4};
  for (std::size_t i = 0; i < std::size(p); ++i)
    EXPECT_EQ(reduction_depth(t, collective::all_reduce, p[i], 100000), depth[i]) << p[i];
  // The ring chains p − 1 on the same buffer.
  EXPECT_EQ(reduction_depth(backend::native, collective::all_reduce, 16, 100000), 15);
}

TEST(backend_spec, reads_and_writes_algorithm_choices) {
  EXPECT_EQ(to_string(tree_all_reduce()), "native:all_reduce=tree");
  EXPECT_EQ(to_string(backend_spec(backend::native)), "native");
  const backend_spec both = parse_backend_spec("native:broadcast=chain,all_reduce=ring");
  EXPECT_EQ(to_string(both), "native:all_reduce=ring,broadcast=chain");
  EXPECT_TRUE(parse_backend_spec(to_string(both)).algorithms.same_as(both.algorithms));
  for (const char* bad : {"mpi:all_reduce=tree", "native:", "native:all_reduce", "native:x=tree",
                          "native:all_reduce=fastest", "native:all_gather=tree",
                          "native:broadcast=tree", "nccl:all_reduce=tree"})
    EXPECT_THROW((void)parse_backend_spec(bad), shardcheck::invalid_problem) << bad;
}
