#include "shardcheck/reference/types.hpp"

#include <string>

namespace shardcheck {

std::string_view to_string(dtype t) {
  switch (t) {
    case dtype::f32: return "f32";
    case dtype::f64: return "f64";
  }
  return "?";
}

std::string_view to_string(weight_layout l) {
  switch (l) {
    case weight_layout::out_in: return "out_in";
    case weight_layout::in_out: return "in_out";
  }
  return "?";
}

std::string_view to_string(value_mode m) {
  switch (m) {
    case value_mode::exact: return "exact";
    case value_mode::uniform: return "uniform";
    case value_mode::wide: return "wide";
    case value_mode::cancel: return "cancel";
    case value_mode::nonfinite: return "nonfinite";
  }
  return "?";
}

std::string_view to_string(activation a) { return a == activation::relu ? "relu" : "identity"; }

namespace {

[[noreturn]] void unknown(std::string_view what, std::string_view s, std::string_view accepted) {
  throw invalid_problem("unknown " + std::string(what) + " '" + std::string(s) +
                        "' (accepted: " + std::string(accepted) + ")");
}

}  // namespace

dtype parse_dtype(std::string_view s) {
  for (dtype t : {dtype::f32, dtype::f64})
    if (s == to_string(t)) return t;
  unknown("dtype", s, "f32|f64");
}

weight_layout parse_weight_layout(std::string_view s) {
  for (weight_layout l : {weight_layout::out_in, weight_layout::in_out})
    if (s == to_string(l)) return l;
  unknown("weight layout", s, "out_in|in_out");
}

value_mode parse_value_mode(std::string_view s) {
  for (value_mode m : {value_mode::exact, value_mode::uniform, value_mode::wide, value_mode::cancel,
                       value_mode::nonfinite})
    if (s == to_string(m)) return m;
  unknown("value mode", s, "exact|uniform|wide|cancel|nonfinite");
}

activation parse_activation(std::string_view s) {
  for (activation a : {activation::identity, activation::relu})
    if (s == to_string(a)) return a;
  unknown("activation", s, "identity|relu");
}

void problem::validate() const {
  if (M < 0 || N < 0 || K < 0)
    throw invalid_problem("negative dimension in problem M=" + std::to_string(M) +
                          " N=" + std::to_string(N) + " K=" + std::to_string(K));
  for (std::int64_t h : hidden)
    if (h < 0) throw invalid_problem("negative hidden width " + std::to_string(h));
  if (hidden.empty() && act != activation::identity)
    throw invalid_problem("act=" + std::string(to_string(act)) +
                          " needs hidden widths (H=...): one layer has no activation");
}

std::vector<std::int64_t> problem::widths() const {
  std::vector<std::int64_t> w{K};
  w.insert(w.end(), hidden.begin(), hidden.end());
  w.push_back(N);
  return w;
}

}  // namespace shardcheck
