#include <gtest/gtest.h>

#include <mpi.h>

#include "completed_case.hpp"
#include "shardcheck/parallel/mpi.hpp"
#include "strategies/pipeline.hpp"

using namespace shardcheck;
using namespace shardcheck::par;

namespace {
// MPI for the point-to-point test (a singleton: no mpirun).
struct mpi_environment : ::testing::Environment {
  void SetUp() override { MPI_Init(nullptr, nullptr); }
  void TearDown() override { MPI_Finalize(); }
};
[[maybe_unused]] auto* const mpi = ::testing::AddGlobalTestEnvironment(new mpi_environment);

const pipeline gpipe(pipeline_schedule::gpipe, false);
const pipeline one_f_one_b(pipeline_schedule::one_f_one_b, false);
const pipeline hybrid(pipeline_schedule::one_f_one_b, true);
}  // namespace

TEST(Placement, OnPrintsAndParses) {
  EXPECT_EQ(placement::On(3).to_string(), "On(3)");
  EXPECT_EQ(placement::parse("On(12)"), placement::On(12));
  EXPECT_EQ(to_string(parse_layout("S(0),On(1),R")), "S(0),On(1),R");
  for (const char* bad : {"On()", "On(-1)", "On(1", "On(x)", "On(1)x"})
    EXPECT_THROW((void)placement::parse(bad), invalid_problem) << bad;
}

TEST(Pipeline, TheHeaderExample) {
  // p = 4, L = 3, part.L = 1,2,0,0: W1 on stage 0, W2 and W3 on stage 1, Y on stage 3.
  const run_case c = completed(
      "strategy=pipeline_1f1b p=4 M=6 N=2 K=3 H=4,5 act=relu part.L=1,2,0,0 m=3");
  EXPECT_EQ(to_string(placement_of(one_f_one_b, tensor_slot{tensor::w, 0}, c)), "R,On(0),R");
  EXPECT_EQ(to_string(placement_of(one_f_one_b, tensor_slot{tensor::w, 2}, c)), "R,On(1),R");
  EXPECT_EQ(to_string(placement_of(one_f_one_b, tensor::y, c)), "R,On(3),R");
  // Only the owner holds a block; the others hold nothing.
  EXPECT_EQ(block_of(one_f_one_b, c, tensor::y, std::vector<int>{0, 3, 0}), (block{0, 6, 0, 2}));
  EXPECT_EQ(block_of(one_f_one_b, c, tensor::y, std::vector<int>{0, 2, 0}), block{});
  // Stage 3 (no layer, the last): F0 B0 F1 B1 F2 B2, one recv per F (Y's rows, 2×2) and per B a
  // recv-free backward that sends dY's rows back.
  const cost_estimate last = one_f_one_b.cost(c, std::vector<int>{0, 3, 0});
  ASSERT_EQ(last.backward.size(), 6u);
  for (std::size_t k = 0; k < 6; ++k) {
    EXPECT_EQ(last.backward[k].kind, k % 2 == 0 ? collective::recv : collective::send) << k;
    EXPECT_EQ(last.backward[k].root, 2) << k;
    EXPECT_EQ(last.backward[k].elements, 4) << k;
  }
}

TEST(Pipeline, OneFOneBHoldsFewerMicroBatchesThanGPipe) {
  // Stage 0 of 2 with m = 8: GPipe holds 8 micro-batches of activations, 1F1B 2.
  const std::string line = " p=2 M=64 N=16 K=16 H=16 act=relu part.L=1,1 m=8";
  const run_case g = completed("strategy=pipeline_gpipe" + line);
  const run_case f = completed("strategy=pipeline_1f1b" + line);
  const std::vector<int> stage0{0, 0, 0};
  const std::int64_t held_g = gpipe.cost(g, stage0).peak_backward;
  const std::int64_t held_f = one_f_one_b.cost(f, stage0).peak_backward;
  // Each micro-batch (8 rows) keeps A_0 and A_1, 8·(16 + 16) doubles, and its vector of them.
  EXPECT_EQ(held_g - held_f,
            6 * static_cast<std::int64_t>(8 * 32 * sizeof(double) + 2 * sizeof(matrix<double>)));
  // The forward pass keeps nothing: both bounds agree.
  EXPECT_EQ(gpipe.cost(g, stage0).peak_forward, one_f_one_b.cost(f, stage0).peak_forward);
}

TEST(Pipeline, MeshFactorsDivideP) {
  // dp | p, then tp | p/dp: dp = 2, tp = 4 does not factorise p = 4.
  EXPECT_THROW(completed("strategy=hybrid_mesh p=4 M=4 N=4 K=4 dp=2 tp=4"), invalid_problem);
  const run_case c = completed("strategy=hybrid_mesh p=8 M=4 N=4 K=4 H=4 dp=2 tp=2");
  EXPECT_EQ(hybrid.mesh_dims(c), (std::vector<int>{2, 2, 2}));
  // A column layer then a row layer over tp; the stages over pp; the rows over dp.
  EXPECT_EQ(to_string(placement_of(hybrid, tensor_slot{tensor::w, 0}, c)), "R,On(0),S(0)");
  EXPECT_EQ(to_string(placement_of(hybrid, tensor_slot{tensor::w, 1}, c)), "R,On(1),S(1)");
  EXPECT_EQ(to_string(placement_of(hybrid, tensor::x, c)), "S(0),On(0),R");
  // Backward ends with one all-reduce of the rank's dW, on the dp axis.
  const cost_estimate e = hybrid.cost(c, std::vector<int>{1, 0, 1});
  ASSERT_FALSE(e.backward.empty());
  EXPECT_EQ(e.backward.back().kind, collective::all_reduce);
  EXPECT_EQ(e.backward.back().axis, 0);
  EXPECT_EQ(e.backward.back().elements, 2 * 4);
}

TEST(PointToPoint, AWrongSizedMessageIsReportedNotFatal) {
  comm self(MPI_COMM_SELF, false);
  const double out[3] = {1, 2, 3};
  double in[2] = {0, 0};
  MPI_Request r = self.start_send<double>(out, 0, 5);
  EXPECT_EQ(self.recv<double>(in, 0, 5), 3);  // 3 elements into 2: reported as 2 + 1
  comm::wait_send(r);
  r = self.start_send<double>(std::span<const double>(out, 1), 0, 6);
  EXPECT_EQ(self.recv<double>(in, 0, 6), 1);
  comm::wait_send(r);
  EXPECT_EQ(in[0], 1);
  EXPECT_THROW((void)self.start_send<double>(out, 1, 0), invalid_problem);  // no rank 1
  EXPECT_THROW((void)self.recv<double>(in, 0, comm::max_p2p_tag), invalid_problem);
}

namespace {
// A strategy whose Y lives on a coordinate past its mesh: nobody would hold it, and nobody
// would check it.
class y_off_the_mesh final : public strategy {
 public:
  [[nodiscard]] std::string name() const override { return "y_off_the_mesh"; }
  [[nodiscard]] std::string summary() const override { return "test"; }
  [[nodiscard]] layout placement_of(tensor t, const run_case& c) const override {
    return {t == tensor::y ? placement::On(c.p) : placement::R()};
  }
  [[nodiscard]] cost_estimate cost(const run_case&, std::span<const int>) const override {
    return {};
  }
  void forward(context&, const run_case&, const any_matrix&, const any_matrix&,
               any_matrix&) const override {}
  void backward(context&, const run_case&, const any_matrix&, const any_matrix&,
                const any_matrix&, any_matrix&, any_matrix&) const override {}
};
}  // namespace

TEST(Placement, OnPastTheMeshIsRejected) {
  run_case c = run_case::parse("strategy=y_off_the_mesh p=2 M=2 N=2 K=2");
  try {
    complete_and_validate(y_off_the_mesh(), c);
    FAIL() << "validated";
  } catch (const invalid_problem& e) {
    EXPECT_NE(std::string(e.what()).find("Y is On(2) on mesh axis 0 of 2"), std::string::npos)
        << e.what();
  }
}
