// Block-cyclic placements: printing and parsing, the tile maps (cyclic_runs) against ScaLAPACK's
// numroc worked by hand and as a property over a sweep, and blocks of a 2 × 2 mesh.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "shardcheck/parallel/case.hpp"
#include "shardcheck/parallel/kernel.hpp"

using namespace shardcheck;
using namespace shardcheck::par;

namespace {

// numroc's formula, as ScaLAPACK's TOOLS/numroc.f states it: the indices of n dealt in blocks of
// nb over nprocs coordinates, block 0 on src, that coordinate r holds.
std::int64_t numroc(std::int64_t n, std::int64_t nb, int r, int src, int nprocs) {
  const std::int64_t mydist = (nprocs + r - src) % nprocs, nblocks = n / nb;
  std::int64_t out = nblocks / nprocs * nb;
  const std::int64_t extra = nblocks % nprocs;
  if (mydist < extra)
    out += nb;
  else if (mydist == extra)
    out += n % nb;
  return out;
}

// A kernel on a pr × pc mesh with every tensor BC(0,nb=mb,src=rsrc),BC(1,nb=nb,src=csrc); pr and
// the block sizes are parameters (no compute: only its placements are used).
class cyclic_kernel final : public kernel {
 public:
  cyclic_kernel() {
    info_.name = "cyclic";
    info_.params = {{"pr", 1, 64, 1, "grid rows", false, true},
                    {"mb", 1, 1 << 20, 2, "row block"},
                    {"nb", 1, 1 << 20, 2, "column block"},
                    {"rsrc", 0, 63, 0, "first row block's grid row"},
                    {"csrc", 0, 63, 0, "first column block's grid column"}};
  }
  const kernel_info& info() const override { return info_; }
  std::vector<int> mesh_dims(const run_case& c) const override {
    const auto pr = static_cast<int>(c.param("pr"));
    return {pr, c.p / pr};
  }
  layout placement(tensor_slot, const run_case& c) const override {
    if (rows_twice_)  // rows dealt on axis 0 and split again on axis 1: rejected
      return {placement::BC(0, c.param("mb")), placement::S(0)};
    return {placement::BC(0, c.param("mb"), static_cast<int>(c.param("rsrc"))),
            placement::BC(1, c.param("nb"), static_cast<int>(c.param("csrc")))};
  }
  bool rows_twice_ = false;
  void forward(context&, const run_case&, const forward_io&) const override {}
  void backward(context&, const run_case&, const backward_io&) const override {}

 private:
  kernel_info info_;
};

}  // namespace

TEST(cyclic_placement, prints_and_parses) {
  EXPECT_EQ(placement::BC(0, 4).to_string(), "BC(0,nb=4)");
  EXPECT_EQ(placement::BC(1, 64, 2).to_string(), "BC(1,nb=64,src=2)");
  EXPECT_EQ(placement::parse("BC(1,nb=64,src=2)"), placement::BC(1, 64, 2));
  EXPECT_EQ(placement::parse("BC(0,nb=4,src=0)"), placement::BC(0, 4));
  const layout l = parse_layout("BC(0,nb=4),BC(1,nb=2,src=1)");
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[1], placement::BC(1, 2, 1));
  EXPECT_EQ(to_string(l), "BC(0,nb=4),BC(1,nb=2,src=1)");
  EXPECT_EQ(to_string(parse_layout("S(0),BC(1,nb=3),R")), "S(0),BC(1,nb=3),R");
  for (const char* bad : {"BC(2,nb=4)", "BC(0,nb=0)", "BC(0,nb=)", "BC(0,4)", "BC(0,nb=4,src=-1)",
                          "BC(0,nb=4,s=1)", "BC(0,nb=4", "BC(0,nb=x)", "BC(0,nb=4,src=)"})
    EXPECT_THROW((void)placement::parse(bad), invalid_problem) << bad;
}

// numroc by hand: n = 10, nb = 3, 2 coordinates, src = 1. Blocks 0-2, 3-5, 6-8, 9 lie on
// coordinates 1, 0, 1, 0: coordinate 1 holds 0-2 and 6-8 (numroc 6), coordinate 0 holds 3-5 and
// the partial block 9 (numroc 4).
TEST(cyclic_runs, match_numroc_worked_by_hand) {
  EXPECT_EQ(cyclic_runs(10, 3, 1, 2, 1), (std::vector<index_run>{{0, 3}, {6, 3}}));
  EXPECT_EQ(cyclic_runs(10, 3, 1, 2, 0), (std::vector<index_run>{{3, 3}, {9, 1}}));
  EXPECT_EQ(numroc(10, 3, 1, 1, 2), 6);
  EXPECT_EQ(numroc(10, 3, 0, 1, 2), 4);
  // A rank without a tile: 5 rows in blocks of 4 on 3 coordinates leave coordinate 2 empty.
  EXPECT_TRUE(cyclic_runs(5, 4, 0, 3, 2).empty());
  // One coordinate: the blocks are adjacent, merged into one run.
  EXPECT_EQ(cyclic_runs(10, 3, 0, 1, 0), (std::vector<index_run>{{0, 10}}));
  EXPECT_TRUE(cyclic_runs(0, 3, 0, 2, 0).empty());
  EXPECT_EQ(global_index(std::vector<index_run>{{0, 3}, {6, 3}}, 4), 7);
  EXPECT_THROW((void)cyclic_runs(10, 0, 0, 2, 0), invalid_problem);
  EXPECT_THROW((void)cyclic_runs(10, 3, 2, 2, 0), invalid_problem);
  EXPECT_THROW((void)cyclic_runs(std::int64_t{1} << 40, 1, 0, 2, 0), invalid_problem);
}

// Over a sweep of lengths, block sizes (partial last blocks, blocks larger than n), coordinate
// counts and sources: each coordinate holds numroc's count, in increasing non-adjacent runs, and
// the coordinates' runs together cover [0, n) exactly once.
TEST(cyclic_runs, partition_the_index_range_exactly_once) {
  for (std::int64_t n = 0; n <= 70; ++n)
    for (std::int64_t nb : {1, 2, 3, 5, 7, 8, 16, 64, 65, 1000})
      for (int coords = 1; coords <= 5; ++coords)
        for (int src = 0; src < coords; ++src) {
          std::vector<int> owner(static_cast<std::size_t>(n), -1);
          for (int r = 0; r < coords; ++r) {
            const auto runs = cyclic_runs(n, nb, src, coords, r);
            std::int64_t total = 0, end = -1;
            for (const index_run& run : runs) {
              ASSERT_GT(run.length, 0);
              ASSERT_GT(run.offset, end) << "runs overlap, touch or go backwards";
              end = run.offset + run.length;
              ASSERT_LE(end, n);
              total += run.length;
              for (std::int64_t i = run.offset; i < end; ++i) {
                ASSERT_EQ(owner[static_cast<std::size_t>(i)], -1) << "index " << i << " twice";
                owner[static_cast<std::size_t>(i)] = r;
              }
            }
            ASSERT_EQ(total, numroc(n, nb, r, src, coords))
                << "n=" << n << " nb=" << nb << " r=" << r << " src=" << src;
          }
          ASSERT_TRUE(std::none_of(owner.begin(), owner.end(), [](int o) { return o < 0; }))
              << "n=" << n << " nb=" << nb << " coords=" << coords << ": an index on no rank";
        }
}

TEST(cyclic_block_of, gives_tiles_partial_tiles_and_empty_ranks) {
  const cyclic_kernel k;
  // 2 × 2 mesh; X is M × K = 7 × 5; rows in blocks of 2 from grid row 1, columns in blocks of 3.
  run_case c = run_case::parse("strategy=cyclic p=4 M=7 N=2 K=5 pr=2 mb=2 nb=3 rsrc=1 csrc=0");
  complete_and_validate(k, c);
  const int r01[] = {0, 1};
  // Grid row 0 holds rows 2-3 and 6 (partial), grid column 1 columns 3-4 (partial).
  block want{2, 3, 3, 2, {{2, 2}, {6, 1}}, {}};
  EXPECT_EQ(block_of(k, c, tensor::x, r01), want);
  EXPECT_EQ(runs_of_cols(want), (std::vector<index_run>{{3, 2}}));
  // Y is 7 × 2: grid column 1 holds no column of it.
  const block y = block_of(k, c, tensor::y, r01);
  EXPECT_EQ(y.cols, 0);
  EXPECT_TRUE(runs_of_cols(y).empty());
  EXPECT_TRUE(c.parts.empty()) << "a block-cyclic dimension needs no partition";
}

TEST(cyclic_block_of, rejects_bad_sources_and_too_many_blocks) {
  const cyclic_kernel k;
  run_case c = run_case::parse("strategy=cyclic p=4 M=7 N=2 K=5 pr=2 rsrc=2");
  EXPECT_THROW(complete_and_validate(k, c), invalid_problem);
  run_case huge = run_case::parse("strategy=cyclic p=2 M=1099511627776 N=1 K=1 pr=2 mb=1");
  EXPECT_THROW(complete_and_validate(k, huge), invalid_problem);
  cyclic_kernel twice;
  twice.rows_twice_ = true;
  run_case t = run_case::parse("strategy=cyclic p=4 M=7 N=2 K=5 pr=2");
  try {
    complete_and_validate(twice, t);
    ADD_FAILURE() << "a dimension block-cyclic on one axis and sharded on another was accepted";
  } catch (const invalid_problem& e) {
    EXPECT_NE(std::string(e.what()).find("also sharded on axis 1"), std::string::npos) << e.what();
  }
}
