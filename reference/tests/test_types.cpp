#include <gtest/gtest.h>

#include <string>

#include "shardcheck/reference/types.hpp"

namespace shardcheck {
namespace {

template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const invalid_problem& e) {
    return e.what();
  }
  return "<nothing thrown>";
}

TEST(types, names_round_trip) {
  for (dtype t : {dtype::f32, dtype::f64}) EXPECT_EQ(parse_dtype(to_string(t)), t);
  for (weight_layout l : {weight_layout::out_in, weight_layout::in_out})
    EXPECT_EQ(parse_weight_layout(to_string(l)), l);
  for (value_mode m : {value_mode::exact, value_mode::uniform, value_mode::wide, value_mode::cancel,
                       value_mode::nonfinite, value_mode::positive, value_mode::zero_inf})
    EXPECT_EQ(parse_value_mode(to_string(m)), m);
  EXPECT_EQ(to_string(value_mode::zero_inf), "zero_inf");
  EXPECT_EQ(to_string(dtype::f32), "f32");
  EXPECT_EQ(to_string(weight_layout::in_out), "in_out");
  EXPECT_EQ(to_string(value_mode::nonfinite), "nonfinite");
}

TEST(types, parse_errors_name_the_accepted_spellings) {
  EXPECT_THROW((void)parse_dtype("float"), invalid_problem);
  EXPECT_THROW((void)parse_weight_layout("OUT_IN"), invalid_problem);
  EXPECT_THROW((void)parse_value_mode(""), invalid_problem);
  EXPECT_NE(message_of([] { (void)parse_dtype("f8"); }).find("f32|f64|bf16|f16"),
            std::string::npos);
  EXPECT_NE(message_of([] { (void)parse_dtype("f8"); }).find("f8"), std::string::npos);
  EXPECT_EQ(parse_dtype("bf16"), dtype::bf16);
  EXPECT_EQ(parse_dtype("f16"), dtype::f16);
  EXPECT_NE(message_of([] { (void)parse_weight_layout("nk"); }).find("out_in|in_out"),
            std::string::npos);
  EXPECT_NE(message_of([] {
              (void)parse_value_mode("random");
            }).find("exact|uniform|wide|cancel|nonfinite|positive|zero_inf"),
            std::string::npos);
}

TEST(types, validate_rejects_negative_dimensions) {
  EXPECT_THROW((problem{-1, 2, 3}.validate()), invalid_problem);
  EXPECT_THROW((problem{1, -2, 3}.validate()), invalid_problem);
  EXPECT_THROW((problem{1, 2, -3}.validate()), invalid_problem);
  EXPECT_NO_THROW((problem{0, 0, 0}.validate()));
  EXPECT_NO_THROW((problem{7, 5, 3}.validate()));
}

// Fits in 64 bits but not in the cost models' headroom: Y alone is 3.4e18 bytes, and a peak of
// three such tensors overflowed (the fuzzer's case p=1 M=4294967296 N=100040096 K=0).
TEST(types, validate_rejects_a_problem_above_its_cost_models_headroom) {
  EXPECT_THROW((problem{4294967296, 100040096, 0}.validate()), invalid_problem);
  EXPECT_NO_THROW((problem{std::int64_t{1} << 26, std::int64_t{1} << 27, 0}.validate()));
}

TEST(types, weight_shape_follows_layout) {
  const problem out_in{7, 5, 3, dtype::f32, weight_layout::out_in};
  const problem in_out{7, 5, 3, dtype::f32, weight_layout::in_out};
  EXPECT_EQ(out_in.w_rows(), 5);
  EXPECT_EQ(out_in.w_cols(), 3);
  EXPECT_EQ(in_out.w_rows(), 3);
  EXPECT_EQ(in_out.w_cols(), 5);
  EXPECT_EQ(size_of(dtype::f32), sizeof(float));
  EXPECT_EQ(size_of(dtype::f64), sizeof(double));
}

}  // namespace
}  // namespace shardcheck
