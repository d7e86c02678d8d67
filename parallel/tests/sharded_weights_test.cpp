#include <gtest/gtest.h>

#include "completed_case.hpp"
#include "strategies/sharded_weights.hpp"

using namespace shardcheck;
using namespace shardcheck::par;

TEST(sharded_weights, the_header_example) {
  const run_case c = completed("strategy=sharded_weights p=2 M=4 N=5 K=4 part.N=3,2 bucket=64");
  const bucket_plan plan = plan_buckets(c);
  EXPECT_EQ(plan.per_bucket, 2);
  EXPECT_EQ(plan.count, 3);
  const claims e = builtin("sharded_weights").cost(c, std::vector<int>{0});
  ASSERT_TRUE(e.collectives.has_value());
  const std::vector<ledger_entry>& forward = e.collectives->forward;
  ASSERT_EQ(forward.size(), 3u);
  EXPECT_EQ(forward[0].bytes_sent, 64);  // rank 0 holds all of rows 0–1: 8 elements
  EXPECT_EQ(forward[1].bytes_sent, 32);  // row 2 of rows 2–3
  EXPECT_EQ(forward[2].bytes_sent, 0);   // row 4 is rank 1's
}

// The ledger the cost model predicts has one all-gather per bucket in each phase, whatever the
// partition, and a bucket smaller than a row still holds one row.
TEST(sharded_weights, gathers_once_per_bucket_of_at_least_one_row) {
  const kernel& k = builtin("sharded_weights");
  for (const char* layout : {"out_in", "in_out"})
    for (std::int64_t bucket :
         std::initializer_list<std::int64_t>{1, 7, 8, 63, 64, 100, 1000, std::int64_t{1} << 40})
      for (const char* sizes : {"3,0,4", "7,0,0", "0,0,7"}) {
        const std::string key = std::string(layout) == "out_in" ? "N" : "K";
        const std::string line =
            "strategy=sharded_weights p=3 M=5 N=7 K=7 layout=" + std::string(layout) +
            " bucket=" + std::to_string(bucket) + " part." + key + "=" + sizes;
        const run_case c = completed(line);
        const bucket_plan plan = plan_buckets(c);
        const std::int64_t row_bytes = 7 * 8;
        EXPECT_EQ(plan.per_bucket,
                  std::min<std::int64_t>(7, std::max<std::int64_t>(1, bucket / row_bytes)))
            << line;
        EXPECT_EQ(plan.count, (7 + plan.per_bucket - 1) / plan.per_bucket) << line;
        for (int r = 0; r < 3; ++r) {
          const claims e = k.cost(c, std::vector<int>{r});
          ASSERT_TRUE(e.collectives.has_value()) << line;
          std::int64_t gathers = 0, scatters = 0;
          for (const auto& x : e.collectives->backward)
            (x.kind == collective::all_gather ? gathers : scatters) += 1;
          EXPECT_EQ(static_cast<std::int64_t>(e.collectives->forward.size()), plan.count) << line;
          EXPECT_EQ(gathers, plan.count) << line;
          EXPECT_EQ(scatters, plan.count) << line;
          for (const auto& x : e.collectives->forward)
            EXPECT_LE(x.elements, plan.per_bucket * 7) << line;
        }
      }
}

// Bound: Y shard + min(2b, R) rows of W; never more with a smaller bucket.
TEST(sharded_weights, bound_never_rises_with_a_smaller_bucket) {
  const kernel& k = builtin("sharded_weights");
  std::int64_t previous = -1;
  for (std::int64_t bucket = 2000; bucket >= 1; bucket -= 7) {
    const run_case c = completed("strategy=sharded_weights p=2 M=4 N=9 K=3 part.N=4,5 bucket=" +
                                 std::to_string(bucket));
    const claims e = k.cost(c, std::vector<int>{0});
    ASSERT_TRUE(e.peak.has_value());
    if (previous >= 0) {
      EXPECT_LE(e.peak->forward, previous) << bucket;
    }
    previous = e.peak->forward;
  }
}
