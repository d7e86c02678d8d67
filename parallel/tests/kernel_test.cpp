#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "completed_case.hpp"
#include "shardcheck/parallel/kernel.hpp"
#include "shardcheck/parallel/plan.hpp"

using namespace shardcheck;
using namespace shardcheck::par;

namespace {
// Every tensor replicated but Y, placed as given; runs nothing.
class replicated final : public kernel {
 public:
  explicit replicated(kernel_info info, layout y = {placement::R()})
      : info_(std::move(info)), y_(std::move(y)) {}
  [[nodiscard]] const kernel_info& info() const override { return info_; }
  [[nodiscard]] layout placement(tensor_slot t, const run_case&) const override {
    return t.t == tensor::y ? y_ : layout{placement::R()};
  }
  void forward(context&, const run_case&, const forward_io&) const override {}
  void backward(context&, const run_case&, const backward_io&) const override {}

 private:
  kernel_info info_;
  layout y_;
};

kernel_info named(const std::string& name) {
  kernel_info info;
  info.name = name;
  info.summary = "test";
  return info;
}
}  // namespace

TEST(kernel_info, supports_everything_by_default) {
  const kernel_info info = named("all");
  for (dtype t : all_dtypes) EXPECT_TRUE(info.supports(t));
  for (weight_layout l : all_layouts) EXPECT_TRUE(info.supports(l));
  for (value_mode m : all_modes) EXPECT_TRUE(info.supports(m));
}

TEST(kernel_info, supports_only_what_it_lists) {
  kernel_info info = named("some");
  info.dtypes = {dtype::f64};
  info.layouts = {weight_layout::in_out};
  info.modes = {value_mode::exact, value_mode::wide};
  EXPECT_TRUE(info.supports(dtype::f64));
  EXPECT_FALSE(info.supports(dtype::f32));
  EXPECT_TRUE(info.supports(weight_layout::in_out));
  EXPECT_FALSE(info.supports(weight_layout::out_in));
  EXPECT_TRUE(info.supports(value_mode::wide));
  EXPECT_FALSE(info.supports(value_mode::uniform));
  EXPECT_FALSE(info.supports(value_mode::nonfinite));
}

TEST(complete_and_validate, rejects_what_the_kernel_does_not_support) {
  kernel_info info = named("f64_in_out_exact");
  info.dtypes = {dtype::f64};
  info.layouts = {weight_layout::in_out};
  info.modes = {value_mode::exact};
  const replicated k(info);
  const std::string base = "strategy=f64_in_out_exact p=2 M=2 N=2 K=2 ";
  run_case good = run_case::parse(base + "dtype=f64 layout=in_out mode=exact");
  EXPECT_NO_THROW(complete_and_validate(k, good));
  for (const char* bad :
       {"dtype=f32 layout=in_out mode=exact", "dtype=f64 layout=out_in mode=exact",
        "dtype=f64 layout=in_out mode=uniform"}) {
    run_case c = run_case::parse(base + bad);
    EXPECT_THROW(complete_and_validate(k, c), invalid_problem) << bad;
  }
}

// A kernel whose Y lives on a coordinate past its mesh: nobody would hold it, and nobody would
// check it.
TEST(complete_and_validate, rejects_an_on_past_the_mesh) {
  const replicated k(named("y_off_the_mesh"), {placement::On(2)});
  run_case c = run_case::parse("strategy=y_off_the_mesh p=2 M=2 N=2 K=2");
  try {
    complete_and_validate(k, c);
    FAIL() << "validated";
  } catch (const invalid_problem& e) {
    EXPECT_NE(std::string(e.what()).find("Y is On(2) on mesh axis 0 of 2"), std::string::npos)
        << e.what();
  }
}

// X placed P on the axes given, on a mesh of p × 1; everything else replicated.
class partial_x final : public kernel {
 public:
  explicit partial_x(layout x) : info_(named("partial_x")), x_(std::move(x)) {}
  [[nodiscard]] const kernel_info& info() const override { return info_; }
  [[nodiscard]] std::vector<int> mesh_dims(const run_case& c) const override { return {c.p, 1}; }
  [[nodiscard]] layout placement(tensor_slot t, const run_case&) const override {
    return t.t == tensor::x ? x_ : layout{placement::R(), placement::R()};
  }
  void forward(context&, const run_case&, const forward_io&) const override {}
  void backward(context&, const run_case&, const backward_io&) const override {}

 private:
  kernel_info info_;
  layout x_;
};

// An input is partial on one mesh axis at most (its shares are split along one).
TEST(complete_and_validate, rejects_an_input_partial_on_two_axes) {
  run_case one = run_case::parse("strategy=partial_x p=2 M=2 N=2 K=2");
  EXPECT_NO_THROW(complete_and_validate(partial_x({placement::P(), placement::R()}), one));
  run_case two = run_case::parse("strategy=partial_x p=2 M=2 N=2 K=2");
  try {
    complete_and_validate(partial_x({placement::P(), placement::P()}), two);
    FAIL() << "validated";
  } catch (const invalid_problem& e) {
    EXPECT_NE(std::string(e.what()).find("X is partial on more than one mesh axis"),
              std::string::npos)
        << e.what();
  }
}

TEST(plan_of, the_header_example) {
  // data_parallel, p = 3, M = 7, N = 5, K = 4, part.M = 3,2,2, on rank 1 (coords {1}).
  const kernel& dp = builtin("data_parallel");
  const run_case c = completed("strategy=data_parallel p=3 M=7 N=5 K=4 part.M=3,2,2");
  const case_plan plan = plan_of(dp, c, std::vector<int>{1});
  EXPECT_EQ(plan.dims, (std::vector<int>{3}));
  EXPECT_EQ(plan.coords, (std::vector<int>{1}));
  EXPECT_EQ(plan.layers(), 1u);
  EXPECT_EQ(plan.outputs, (std::vector<tensor_slot>{tensor::y, tensor::dx, tensor::dw}));
  struct row {
    tensor t;
    const char* name;
    const char* where;
    block region;
    const char* rows;
    const char* cols;
  };
  const row want[] = {
      {tensor::x, "X", "S(0)", {3, 2, 0, 4}, "M", "K"},
      {tensor::w, "W", "R", {0, 5, 0, 4}, "N", "K"},
      {tensor::y, "Y", "R", {0, 7, 0, 5}, "M", "N"},
      {tensor::dy, "dY", "S(0)", {3, 2, 0, 5}, "M", "N"},
      {tensor::dx, "dX", "S(0)", {3, 2, 0, 4}, "M", "K"},
      {tensor::dw, "dW", "R", {0, 5, 0, 4}, "N", "K"},
  };
  ASSERT_EQ(plan.tensors.size(), std::size(want));
  for (std::size_t i = 0; i < std::size(want); ++i) {
    const tensor_plan& t = plan.tensors[i];
    EXPECT_EQ(t.slot, tensor_slot{want[i].t}) << want[i].name;
    EXPECT_EQ(&plan[want[i].t], &t) << want[i].name;
    EXPECT_EQ(t.name, want[i].name);
    EXPECT_EQ(to_string(t.where), want[i].where) << want[i].name;
    EXPECT_EQ(t.region, want[i].region) << want[i].name;
    EXPECT_EQ(t.dims, (std::pair<std::string, std::string>{want[i].rows, want[i].cols}))
        << want[i].name;
    const bool input = want[i].t == tensor::x || want[i].t == tensor::w || want[i].t == tensor::dy;
    EXPECT_EQ(t.is_input(), input) << want[i].name;
    EXPECT_EQ(t.data_id, input ? data_id_of(want[i].t) : 0u) << want[i].name;
  }
  // Each input its own stream.
  EXPECT_NE(plan[tensor::x].data_id, plan[tensor::w].data_id);
  EXPECT_NE(plan[tensor::w].data_id, plan[tensor::dy].data_id);
  EXPECT_THROW((void)plan[(tensor_slot{tensor::w, 1})], invalid_problem);
}

TEST(data_id_of, gives_every_weight_of_a_stack_its_own_stream) {
  std::vector<std::uint32_t> ids{data_id_of(tensor::x), data_id_of(tensor::dy)};
  for (std::size_t l = 0; l < 6; ++l) ids.push_back(data_id_of(tensor_slot{tensor::w, l}));
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end());
}
