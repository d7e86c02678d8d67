#include <gtest/gtest.h>

#include "completed_case.hpp"
#include "shardcheck/parallel/case.hpp"
#include "shardcheck/parallel/kernel.hpp"

using namespace shardcheck;
using namespace shardcheck::par;

TEST(run_case, round_trips_through_its_replay_line) {
  const std::string line =
      "strategy=data_parallel p=3 M=7 N=5 K=4 dtype=f32 layout=in_out mode=cancel seed=42 "
      "backend=native part.M=3,0,4 gather=0";
  const run_case c = run_case::parse(line);
  EXPECT_EQ(c.to_string(), line);
  EXPECT_EQ(c.backend, backend::native);
  EXPECT_EQ(c.part("M").size(1), 0);
  EXPECT_EQ(c.param("gather"), 0);
}

TEST(run_case, carries_the_native_algorithm_choices) {
  const std::string line =
      "strategy=data_parallel p=4 M=7 N=5 K=4 dtype=f64 layout=out_in mode=uniform seed=1 "
      "backend=native:all_reduce=tree part.M=2,2,2,1 gather=1";
  const run_case c = run_case::parse(line);
  EXPECT_EQ(c.to_string(), line);
  EXPECT_EQ(c.backend, backend::native);
  EXPECT_EQ(c.backend.algorithms.of(collective::all_reduce), algorithm::tree);
  EXPECT_THROW((void)run_case::parse("strategy=dp p=1 M=1 N=1 K=1 backend=mpi:all_reduce=tree"),
               invalid_problem);
}

TEST(run_case, reads_a_line_without_a_backend_as_mpi) {
  const run_case c = run_case::parse("strategy=data_parallel p=2 M=4 N=3 K=5 part.M=2,2");
  EXPECT_EQ(c.backend, backend::mpi);
  EXPECT_THROW((void)run_case::parse("strategy=dp p=1 M=1 N=1 K=1 backend=nccl"), invalid_problem);
}

TEST(run_case, rejects_malformed_lines_with_clear_errors) {
  for (const char* bad :
       {"garbage", "strategy=dp p=x M=1 N=1 K=1", "strategy=dp p=1 M=-1 N=1 K=1",
        "strategy=dp p=1 M=1 N=1", "strategy=dp p=0 M=1 N=1 K=1", "strategy=dp p=1 p=2 M=1 N=1 K=1",
        "strategy=dp p=1 M=1 N=1 K=1 dtype=f8", "strategy=dp p=1 M=1 N=1 K=1 part.M=1,x", "=3"})
    EXPECT_THROW((void)run_case::parse(bad), invalid_problem) << bad;
}

TEST(run_case, carries_a_precision_policy_for_16_bit_storage) {
  const std::string line =
      "strategy=row_parallel p=2 M=4 N=3 K=8 dtype=bf16 acc=f32 reduce=bf16 layout=out_in "
      "mode=uniform seed=1 backend=native part.K=4,4 scatter=0";
  const run_case c = run_case::parse(line);
  EXPECT_EQ(c.to_string(), line);
  EXPECT_EQ(c.policy, (precision{dtype::f32, dtype::bf16}));
  // Without acc= and reduce=: both f32, printed.
  const run_case d = run_case::parse("strategy=row_parallel p=1 M=1 N=1 K=1 dtype=f16");
  EXPECT_NE(d.to_string().find("dtype=f16 acc=f32 reduce=f32 "), std::string::npos);
  // An f32 case prints no policy.
  EXPECT_EQ(run_case::parse("strategy=dp p=1 M=1 N=1 K=1 dtype=f32").to_string().find("acc="),
            std::string::npos);
}

TEST(run_case, rejects_a_policy_that_does_not_fit_the_dtype) {
  for (const char* bad : {"strategy=dp p=1 M=1 N=1 K=1 dtype=f32 acc=f32",
                          "strategy=dp p=1 M=1 N=1 K=1 dtype=bf16 reduce=f16",
                          "strategy=dp p=1 M=1 N=1 K=1 dtype=f16 acc=f64",
                          "strategy=dp p=1 M=1 N=1 K=1 dtype=bf16 acc=half"})
    EXPECT_THROW((void)run_case::parse(bad), invalid_problem) << bad;
}

TEST(run_case, carries_a_stacks_hidden_widths_and_activation) {
  const run_case c = run_case::parse("strategy=data_parallel p=2 M=8 N=3 K=5 H=6,0 act=relu");
  EXPECT_NE(c.to_string().find(" K=5 H=6,0 act=relu dtype="), std::string::npos);
  EXPECT_EQ(run_case::parse(c.to_string()).to_string(), c.to_string());
  EXPECT_EQ(c.prob.layers(), 3u);
  EXPECT_EQ(c.prob.widths(), (std::vector<std::int64_t>{5, 6, 0, 3}));
  EXPECT_EQ(c.prob.act, activation::relu);
  // A single layer prints no stack keys: its replay lines are what they were.
  EXPECT_EQ(run_case::parse("strategy=data_parallel p=1 M=1 N=1 K=1").to_string().find("H="),
            std::string::npos);
  for (const char* bad :
       {"strategy=dp p=1 M=1 N=1 K=1 act=relu", "strategy=dp p=1 M=1 N=1 K=1 H=-2",
        "strategy=dp p=1 M=1 N=1 K=1 H=2 act=tanh"})
    EXPECT_THROW((void)run_case::parse(bad), invalid_problem) << bad;
}

TEST(complete_and_validate, checks_partitions_and_parameters) {
  const kernel& dp = builtin("data_parallel");
  run_case c = run_case::parse("strategy=data_parallel p=3 M=7 N=5 K=4");
  complete_and_validate(dp, c);
  EXPECT_EQ(c.part("M").to_string(), "3,2,2");
  EXPECT_EQ(c.param("gather"), 1);
  run_case wrong_length = run_case::parse("strategy=data_parallel p=3 M=7 N=5 K=4 part.M=3,3,3");
  EXPECT_THROW(complete_and_validate(dp, wrong_length), invalid_problem);
  run_case wrong_parts = run_case::parse("strategy=data_parallel p=3 M=7 N=5 K=4 part.M=7");
  EXPECT_THROW(complete_and_validate(dp, wrong_parts), invalid_problem);
  run_case unknown = run_case::parse("strategy=data_parallel p=3 M=7 N=5 K=4 bucket=3");
  EXPECT_THROW(complete_and_validate(dp, unknown), invalid_problem);
  run_case out_of_range = run_case::parse("strategy=data_parallel p=3 M=7 N=5 K=4 gather=2");
  EXPECT_THROW(complete_and_validate(dp, out_of_range), invalid_problem);
  run_case unused = run_case::parse("strategy=data_parallel p=3 M=7 N=5 K=4 part.K=1,1,2");
  EXPECT_THROW(complete_and_validate(dp, unused), invalid_problem);
}

TEST(complete_and_validate, refuses_a_stack_for_a_single_layer_kernel) {
  run_case c = run_case::parse("strategy=data_parallel p=1 M=2 N=3 K=4 H=5");
  EXPECT_THROW(complete_and_validate(builtin("data_parallel"), c), invalid_problem);
}

TEST(block_of, follows_placements_and_partitions) {
  const kernel& dp = builtin("data_parallel");
  run_case c = run_case::parse("strategy=data_parallel p=3 M=7 N=5 K=4 part.M=3,0,4 gather=0");
  complete_and_validate(dp, c);
  const int rank2[] = {2};
  EXPECT_EQ(block_of(dp, c, tensor::x, rank2), (block{3, 4, 0, 4}));
  EXPECT_EQ(block_of(dp, c, tensor::y, rank2), (block{3, 4, 0, 5}));
  EXPECT_EQ(block_of(dp, c, tensor::w, rank2), (block{0, 5, 0, 4}));
  const int rank1[] = {1};
  EXPECT_EQ(block_of(dp, c, tensor::dx, rank1), (block{3, 0, 0, 4}));
  EXPECT_EQ(coords_of(5, {2, 3}), (std::vector<int>{1, 2}));
}

TEST(column_row_pair, has_a_tensor_per_layer_and_splits_its_hidden_width) {
  const kernel& pair = builtin("column_row_pair");
  run_case c =
      run_case::parse("strategy=column_row_pair p=3 M=5 N=4 K=7 H=7 act=relu part.H=3,0,4");
  complete_and_validate(pair, c);
  std::vector<std::string> names;
  for (const tensor_slot& t : tensors_of(c)) names.push_back(name_of(t, c));
  EXPECT_EQ(names, (std::vector<std::string>{"X", "W1", "W2", "Y", "dY", "dX", "dW1", "dW2"}));
  const int rank2[] = {2};
  // out_in: W1 is H×K split by rows, W2 is N×H split by columns, on the same part.H.
  EXPECT_EQ(block_of(pair, c, tensor_slot{tensor::w, 0}, rank2), (block{3, 4, 0, 7}));
  EXPECT_EQ(block_of(pair, c, tensor_slot{tensor::dw, 1}, rank2), (block{0, 4, 3, 4}));
  const claims cost = pair.cost(c, rank2);
  ASSERT_TRUE(cost.collectives.has_value());
  ASSERT_EQ(cost.collectives->forward.size(), 1u);
  EXPECT_EQ(cost.collectives->forward[0].kind, collective::all_reduce);
  ASSERT_EQ(cost.collectives->backward.size(), 1u);
  ASSERT_TRUE(cost.chains.has_value());
  EXPECT_EQ(cost.chains->size(), 2u);
  // A pair needs two layers; a single-layer case names no W1.
  run_case single = run_case::parse("strategy=column_row_pair p=1 M=1 N=1 K=1");
  EXPECT_THROW(complete_and_validate(pair, single), invalid_problem);
  EXPECT_EQ(name_of(tensor_slot{tensor::w, 0}, single), "W");
}
