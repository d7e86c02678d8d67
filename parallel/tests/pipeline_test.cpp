#include <gtest/gtest.h>

#include "completed_case.hpp"
#include "shardcheck/parallel/matrix.hpp"

using namespace shardcheck;
using namespace shardcheck::par;

TEST(pipeline, the_header_example) {
  // p = 4, L = 3, part.L = 1,2,0,0: W1 on stage 0, W2 and W3 on stage 1, Y on stage 3.
  const kernel& one_f_one_b = builtin("pipeline_1f1b");
  const run_case c =
      completed("strategy=pipeline_1f1b p=4 M=6 N=2 K=3 H=4,5 act=relu part.L=1,2,0,0 m=3");
  EXPECT_EQ(to_string(one_f_one_b.placement(tensor_slot{tensor::w, 0}, c)), "R,On(0),R");
  EXPECT_EQ(to_string(one_f_one_b.placement(tensor_slot{tensor::w, 2}, c)), "R,On(1),R");
  EXPECT_EQ(to_string(one_f_one_b.placement(tensor::y, c)), "R,On(3),R");
  // Only the owner holds a block; the others hold nothing.
  EXPECT_EQ(block_of(one_f_one_b, c, tensor::y, std::vector<int>{0, 3, 0}), (block{0, 6, 0, 2}));
  EXPECT_EQ(block_of(one_f_one_b, c, tensor::y, std::vector<int>{0, 2, 0}), block{});
  // Stage 3 (no layer, the last): F0 B0 F1 B1 F2 B2, one recv per F (Y's rows, 2×2) and per B a
  // recv-free backward that sends dY's rows back.
  const claims last = one_f_one_b.cost(c, std::vector<int>{0, 3, 0});
  ASSERT_TRUE(last.collectives.has_value());
  const std::vector<ledger_entry>& backward = last.collectives->backward;
  ASSERT_EQ(backward.size(), 6u);
  for (std::size_t k = 0; k < 6; ++k) {
    EXPECT_EQ(backward[k].kind, k % 2 == 0 ? collective::recv : collective::send) << k;
    EXPECT_EQ(backward[k].root, 2) << k;
    EXPECT_EQ(backward[k].elements, 4) << k;
  }
}

TEST(pipeline, one_f_one_b_holds_fewer_micro_batches_than_gpipe) {
  // Stage 0 of 2 with m = 8: GPipe holds 8 micro-batches of activations, 1F1B 2.
  const std::string line = " p=2 M=64 N=16 K=16 H=16 act=relu part.L=1,1 m=8";
  const run_case g = completed("strategy=pipeline_gpipe" + line);
  const run_case f = completed("strategy=pipeline_1f1b" + line);
  const std::vector<int> stage0{0, 0, 0};
  const claims gpipe = builtin("pipeline_gpipe").cost(g, stage0);
  const claims one_f_one_b = builtin("pipeline_1f1b").cost(f, stage0);
  ASSERT_TRUE(gpipe.peak.has_value());
  ASSERT_TRUE(one_f_one_b.peak.has_value());
  // Each micro-batch (8 rows) keeps A_0 and A_1, 8·(16 + 16) doubles, and its vector of them.
  EXPECT_EQ(gpipe.peak->backward - one_f_one_b.peak->backward,
            6 * static_cast<std::int64_t>(8 * 32 * sizeof(double) + 2 * sizeof(matrix<double>)));
  // The forward pass keeps nothing: both bounds agree.
  EXPECT_EQ(gpipe.peak->forward, one_f_one_b.peak->forward);
}

TEST(hybrid_mesh, factors_p_into_its_mesh) {
  // dp | p, then tp | p/dp: dp = 2, tp = 4 does not factorise p = 4.
  EXPECT_THROW(completed("strategy=hybrid_mesh p=4 M=4 N=4 K=4 dp=2 tp=4"), invalid_problem);
  const kernel& hybrid = builtin("hybrid_mesh");
  const run_case c = completed("strategy=hybrid_mesh p=8 M=4 N=4 K=4 H=4 dp=2 tp=2");
  EXPECT_EQ(hybrid.mesh_dims(c), (std::vector<int>{2, 2, 2}));
  // A column layer then a row layer over tp; the stages over pp; the rows over dp.
  EXPECT_EQ(to_string(hybrid.placement(tensor_slot{tensor::w, 0}, c)), "R,On(0),S(0)");
  EXPECT_EQ(to_string(hybrid.placement(tensor_slot{tensor::w, 1}, c)), "R,On(1),S(1)");
  EXPECT_EQ(to_string(hybrid.placement(tensor::x, c)), "S(0),On(0),R");
  // Backward ends with one all-reduce of the rank's dW, on the dp axis.
  const claims e = hybrid.cost(c, std::vector<int>{1, 0, 1});
  ASSERT_TRUE(e.collectives.has_value());
  const std::vector<ledger_entry>& backward = e.collectives->backward;
  ASSERT_FALSE(backward.empty());
  EXPECT_EQ(backward.back().kind, collective::all_reduce);
  EXPECT_EQ(backward.back().axis, 0);
  EXPECT_EQ(backward.back().elements, 2 * 4);
}
