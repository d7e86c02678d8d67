#include "shardcheck/parallel/redistribute.hpp"

#include <gtest/gtest.h>

namespace shardcheck::par {
namespace {

// The collective each pair needs: the table in redistribute.hpp.
TEST(redistribution_cost_of, takes_the_minimal_collective_per_pair) {
  const partition rows({3, 0, 2}), cols({1, 2, 1});
  const global_shape g{5, 4, &rows, &cols};
  const placement R = placement::R(), S0 = placement::S(0), S1 = placement::S(1),
                  P = placement::P();
  struct row {
    placement from, to;
    int collectives;
    collective kind;
  };
  const row table[] = {
      {R, R, 0, {}},
      {R, S0, 0, {}},
      {R, S1, 0, {}},
      {S0, S0, 0, {}},
      {S1, S1, 0, {}},
      {P, P, 0, {}},
      {S0, R, 1, collective::all_gather},
      {S1, R, 1, collective::all_gather},
      {P, R, 1, collective::all_reduce},
      {P, S0, 1, collective::reduce_scatter},
      {P, S1, 1, collective::reduce_scatter},
      {S0, S1, 1, collective::all_to_all},
      {S1, S0, 1, collective::all_to_all},
  };
  for (const row& r : table) {
    const auto cost = redistribution_cost_of(g, r.from, r.to, 1, 3, dtype::f64, backend::mpi);
    ASSERT_EQ(static_cast<int>(cost.entries.size()), r.collectives)
        << r.from.to_string() << " → " << r.to.to_string();
    if (r.collectives == 1) {
      EXPECT_EQ(cost.entries[0].kind, r.kind);
    }
  }
}

TEST(redistribution_cost_of, makes_nothing_partial) {
  const global_shape g{2, 2, nullptr, nullptr};
  EXPECT_THROW((void)redistribution_cost_of(g, placement::R(), placement::P(), 0, 2, dtype::f32,
                                            backend::mpi),
               invalid_problem);
}

TEST(redistribution_cost_of, needs_a_partition_to_shard) {
  const global_shape g{2, 2, nullptr, nullptr};
  EXPECT_THROW((void)redistribution_cost_of(g, placement::R(), placement::S(0), 0, 2, dtype::f32,
                                            backend::mpi),
               invalid_problem);
}

// Rank 1 of rows 3,0,2 holds no rows: S(0) → S(1) sends nothing and receives its column of the
// other ranks' rows (3·2 + 2·2 elements).
TEST(redistribution_cost_of, counts_an_all_to_all_with_an_empty_part) {
  const partition rows({3, 0, 2}), cols({1, 2, 1});
  const global_shape g{5, 4, &rows, &cols};
  const auto cost =
      redistribution_cost_of(g, placement::S(0), placement::S(1), 1, 3, dtype::f64, backend::mpi);
  ASSERT_EQ(cost.entries.size(), 1u);
  EXPECT_EQ(cost.entries[0].elements, 10);
  EXPECT_EQ(cost.entries[0].bytes_sent, 0);
  EXPECT_EQ(cost.entries[0].bytes_received, 80);
  // Output 5×2, nothing packed, two count arrays of 3.
  EXPECT_EQ(cost.peak_bytes, 80 + 48);
}

}  // namespace
}  // namespace shardcheck::par
