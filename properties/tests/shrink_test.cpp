// The final shrinking pass's step on its own (no MPI): which cases are one simplification away,
// and where a pass over them ends for a defect given as a predicate.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "completed_case.hpp"
#include "shardcheck/properties/shrink.hpp"

namespace shardcheck::prop {
namespace {

using par::builtin;
using par::completed;
using par::run_case;

std::vector<std::string> lines(const std::vector<run_case>& cs) {
  std::vector<std::string> out;
  for (const run_case& c : cs) out.push_back(c.to_string());
  return out;
}

bool has(const std::vector<std::string>& ls, const std::string& line) {
  return std::find(ls.begin(), ls.end(), line) != ls.end();
}

// The issue's case: an empty-shard defect RapidCheck left at p=4, nonfinite, native.
const char* const issue_case =
    "strategy=data_parallel p=4 M=3 N=2 K=5 dtype=f64 layout=out_in mode=nonfinite seed=77 "
    "backend=native part.M=0,0,0,3";

// Some rank holds no rows of X while another holds some (what mutant.empty_shard@data_parallel
// needs to act), and Y has an element to be wrong in.
bool empty_shard_fails(const run_case& c) {
  const auto& m = c.part("M");
  bool empty = false, full = false;
  for (int r = 0; r < m.parts(); ++r) (m.size(r) == 0 ? empty : full) = true;
  return empty && full && c.prob.N > 0;
}

TEST(simpler, tries_each_field_in_order) {
  const run_case c = completed(issue_case);
  const std::vector<std::string> got = lines(simpler(c, builtin("data_parallel")));
  const std::string tail = " gather=1";
  const auto line = [&](const std::string& head, const std::string& mid) {
    return "strategy=data_parallel " + head + " dtype=f64 layout=out_in " + mid + tail;
  };
  const std::vector<std::string> want_first = {
      // fewer workers: refitted (empty parts removed, the last first), then balanced
      line("p=1 M=3 N=2 K=5", "mode=nonfinite seed=77 backend=native part.M=3"),
      line("p=2 M=3 N=2 K=5", "mode=nonfinite seed=77 backend=native part.M=0,3"),
      line("p=2 M=3 N=2 K=5", "mode=nonfinite seed=77 backend=native part.M=2,1"),
      line("p=3 M=3 N=2 K=5", "mode=nonfinite seed=77 backend=native part.M=0,0,3"),
      line("p=3 M=3 N=2 K=5", "mode=nonfinite seed=77 backend=native part.M=1,1,1"),
      // a smaller dimension, the partition cut at the new length
      line("p=4 M=0 N=2 K=5", "mode=nonfinite seed=77 backend=native part.M=0,0,0,0"),
      line("p=4 M=1 N=2 K=5", "mode=nonfinite seed=77 backend=native part.M=0,0,0,1"),
      line("p=4 M=2 N=2 K=5", "mode=nonfinite seed=77 backend=native part.M=0,0,0,2"),
      line("p=4 M=3 N=0 K=5", "mode=nonfinite seed=77 backend=native part.M=0,0,0,3"),
      line("p=4 M=3 N=1 K=5", "mode=nonfinite seed=77 backend=native part.M=0,0,0,3"),
      line("p=4 M=3 N=2 K=0", "mode=nonfinite seed=77 backend=native part.M=0,0,0,3"),
      line("p=4 M=3 N=2 K=1", "mode=nonfinite seed=77 backend=native part.M=0,0,0,3"),
      line("p=4 M=3 N=2 K=2", "mode=nonfinite seed=77 backend=native part.M=0,0,0,3"),
      line("p=4 M=3 N=2 K=4", "mode=nonfinite seed=77 backend=native part.M=0,0,0,3"),
      // the mode, the backend, a balanced partition, the seed
      line("p=4 M=3 N=2 K=5", "mode=exact seed=77 backend=native part.M=0,0,0,3"),
      line("p=4 M=3 N=2 K=5", "mode=uniform seed=77 backend=native part.M=0,0,0,3"),
      line("p=4 M=3 N=2 K=5", "mode=nonfinite seed=77 backend=mpi part.M=0,0,0,3"),
      line("p=4 M=3 N=2 K=5", "mode=nonfinite seed=77 backend=native part.M=1,1,1,0"),
      line("p=4 M=3 N=2 K=5", "mode=nonfinite seed=0 backend=native part.M=0,0,0,3"),
  };
  EXPECT_EQ(got, want_first);
}

TEST(simpler, gives_valid_distinct_cases_other_than_the_case) {
  const char* const cases[] = {
      issue_case,
      "strategy=hybrid_mesh p=8 M=9 N=6 K=7 dtype=f32 mode=wide seed=5 backend=native dp=2 tp=2",
      "strategy=summa p=4 M=5 N=3 K=6 mode=cancel seed=9",
      "strategy=column_row_pair p=3 M=5 N=4 K=7 H=7 act=relu mode=uniform part.H=3,0,4",
      "strategy=pipeline_1f1b p=3 M=6 N=2 K=3 H=4,5 act=relu mode=wide seed=3",
      "strategy=sharded_weights p=3 M=4 N=9 K=2 mode=uniform seed=11",
  };
  for (const char* line : cases) {
    const run_case c = completed(line);
    const par::kernel& k = builtin(c.strategy);
    const std::vector<run_case> got = simpler(c, k);
    EXPECT_FALSE(got.empty()) << line;
    std::set<std::string> seen;
    for (run_case d : got) {
      const std::string s = d.to_string();
      EXPECT_NE(s, c.to_string());
      EXPECT_TRUE(seen.insert(s).second) << "twice: " << s;
      EXPECT_NO_THROW(par::complete_and_validate(k, d)) << s;
      EXPECT_EQ(d.to_string(), s) << "not complete: " << s;
      EXPECT_LE(d.p, c.p) << s;
    }
  }
}

TEST(simpler, re_derives_the_mesh_factors_for_fewer_workers) {
  const run_case c = completed("strategy=hybrid_mesh p=8 M=4 N=4 K=4 dp=2 tp=2");
  // dp and tp become gcd(value, what p leaves): 2 and 2 at p=4, 1 and 1 at p=7 and p=1.
  std::set<std::string> factors;
  for (const run_case& d : simpler(c, builtin("hybrid_mesh")))
    if (d.p != 8)
      factors.insert("p=" + std::to_string(d.p) + " dp=" + std::to_string(d.param("dp")) +
                     " tp=" + std::to_string(d.param("tp")));
  EXPECT_EQ(factors, (std::set<std::string>{"p=1 dp=1 tp=1", "p=4 dp=2 tp=2", "p=7 dp=1 tp=1"}));
}

TEST(simpler, leaves_what_a_run_pins) {
  case_pins pins;
  pins.backend = par::backend::native;
  pins.p = 4;
  pins.params["gather"] = 0;
  const run_case pinned = completed(std::string(issue_case) + " gather=0");
  for (const run_case& d : simpler(pinned, builtin("data_parallel"), pins)) {
    EXPECT_EQ(d.p, 4) << d.to_string();
    EXPECT_EQ(d.backend, par::backend::native) << d.to_string();
    EXPECT_EQ(d.param("gather"), 0) << d.to_string();
  }
  // Unpinned, the same case is simplified in all three.
  bool p = false, backend = false, gather = false;
  for (const run_case& d : simpler(pinned, builtin("data_parallel"))) {
    p = p || d.p != 4;
    backend = backend || d.backend == par::backend::mpi;
    gather = gather || d.param("gather") == 1;
  }
  EXPECT_TRUE(p && backend && gather);
}

TEST(simpler, keeps_pinned_dimensions_inside_their_ranges) {
  case_pins pins;
  pins.m = dim_range{2, 3};
  pins.k = dim_range{5, 5};
  const run_case c = completed(issue_case);  // M=3, K=5
  bool m_smaller = false;
  for (const run_case& d : simpler(c, builtin("data_parallel"), pins)) {
    EXPECT_TRUE(d.prob.M >= 2 && d.prob.M <= 3) << d.to_string();
    EXPECT_EQ(d.prob.K, 5) << d.to_string();
    m_smaller = m_smaller || d.prob.M == 2;
  }
  EXPECT_TRUE(m_smaller);  // inside the range, M still shrinks
}

TEST(simpler, exact_mode_for_a_stack_runs_in_f64_where_f32_would_round) {
  // K·H = 200·200: exact mode's grid goes coarser (stack.hpp exact_grid) and stays in f32.
  const run_case small = completed(
      "strategy=column_row_pair p=2 M=2 N=2 K=200 H=200 act=identity dtype=f32 mode=uniform "
      "seed=0");
  EXPECT_TRUE(has(lines(simpler(small, builtin("column_row_pair"))),
                  "strategy=column_row_pair p=2 M=2 N=2 K=200 H=200 act=identity dtype=f32 "
                  "layout=out_in mode=exact seed=0 backend=mpi part.H=100,100"));
  // K·H = 4200·4200 > 2^24: even values in {−1, 0, 1} would round in f32, so f64.
  const run_case c = completed(
      "strategy=column_row_pair p=2 M=2 N=2 K=4200 H=4200 act=identity dtype=f32 mode=uniform "
      "seed=0");
  const std::vector<std::string> got = lines(simpler(c, builtin("column_row_pair")));
  EXPECT_TRUE(has(got,
                  "strategy=column_row_pair p=2 M=2 N=2 K=4200 H=4200 act=identity dtype=f64 "
                  "layout=out_in mode=exact seed=0 backend=mpi part.H=2100,2100"))
      << ::testing::PrintToString(got);
  for (const run_case& d : simpler(c, builtin("column_row_pair")))
    if (d.mode == value_mode::exact && d.prob.K == 4200 && d.prob.hidden[0] == 4200) {
      EXPECT_EQ(d.prob.type, dtype::f64) << d.to_string();
    }
}

TEST(simpler, none_from_the_simplest_case) {
  const run_case c = completed(
      "strategy=data_parallel p=1 M=0 N=0 K=0 dtype=f64 mode=exact seed=0 backend=mpi gather=1");
  EXPECT_TRUE(simpler(c, builtin("data_parallel")).empty())
      << ::testing::PrintToString(lines(simpler(c, builtin("data_parallel"))));
}

TEST(shrink_to_local_minimum, takes_the_issue_case_to_p2_exact) {
  const run_case c = completed(issue_case);
  ASSERT_TRUE(empty_shard_fails(c));
  const local_minimum m =
      shrink_to_local_minimum(c, builtin("data_parallel"), {}, {}, empty_shard_fails);
  EXPECT_TRUE(m.reached);
  EXPECT_EQ(m.c.to_string(),
            "strategy=data_parallel p=2 M=1 N=1 K=0 dtype=f64 layout=out_in mode=exact seed=0 "
            "backend=mpi part.M=1,0 gather=1");
  // A local minimum: no single simplification still fails.
  for (const run_case& d : simpler(m.c, builtin("data_parallel")))
    EXPECT_FALSE(empty_shard_fails(d)) << d.to_string();
  EXPECT_LT(m.runs, 100);
}

TEST(shrink_to_local_minimum, ends_within_its_budget) {
  const run_case c = completed(issue_case);
  const auto always = [](const run_case&) { return true; };
  const local_minimum all = shrink_to_local_minimum(c, builtin("data_parallel"), {}, {}, always);
  EXPECT_TRUE(all.reached);
  EXPECT_EQ(all.c.to_string(),
            "strategy=data_parallel p=1 M=0 N=0 K=0 dtype=f64 layout=out_in mode=exact seed=0 "
            "backend=mpi part.M=0 gather=1");
  int asked = 0;
  const local_minimum bounded =
      shrink_to_local_minimum(c, builtin("data_parallel"), {}, {3, 60}, [&](const run_case&) {
        ++asked;
        return false;
      });
  EXPECT_FALSE(bounded.reached);
  EXPECT_EQ(bounded.runs, 3);
  EXPECT_EQ(asked, 3);
  EXPECT_EQ(bounded.c.to_string(), c.to_string());
  // No run begins once the time is spent.
  const local_minimum timed = shrink_to_local_minimum(c, builtin("data_parallel"), {}, {200, 0},
                                                      [](const run_case&) { return true; });
  EXPECT_FALSE(timed.reached);
  EXPECT_EQ(timed.runs, 0);
}

}  // namespace
}  // namespace shardcheck::prop
