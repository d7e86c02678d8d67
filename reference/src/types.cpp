#include "shardcheck/reference/types.hpp"

#include <string>
#include <utility>

namespace shardcheck {

std::string_view to_string(dtype t) {
  switch (t) {
    case dtype::f32: return "f32";
    case dtype::f64: return "f64";
    case dtype::bf16: return "bf16";
    case dtype::f16: return "f16";
  }
  return "?";
}

std::string to_string(const precision& p) {
  return "acc=" + std::string(to_string(p.acc)) + " reduce=" + std::string(to_string(p.reduce));
}

void validate_policy(dtype storage, const precision& p) {
  if (!is_storage16(storage))
    throw invalid_problem("acc= and reduce= are only for dtype=bf16 or f16, not " +
                          std::string(to_string(storage)));
  for (const auto& [name, t] : {std::pair{"acc", p.acc}, std::pair{"reduce", p.reduce}})
    if (t != dtype::f32 && t != storage)
      throw invalid_problem(std::string(name) + "=" + std::string(to_string(t)) +
                            " with dtype=" + std::string(to_string(storage)) +
                            ": it must be f32 or " + std::string(to_string(storage)));
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
    case value_mode::positive: return "positive";
    case value_mode::zero_inf: return "zero_inf";
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
  for (dtype t : {dtype::f32, dtype::f64, dtype::bf16, dtype::f16})
    if (s == to_string(t)) return t;
  unknown("dtype", s, "f32|f64|bf16|f16");
}

weight_layout parse_weight_layout(std::string_view s) {
  for (weight_layout l : {weight_layout::out_in, weight_layout::in_out})
    if (s == to_string(l)) return l;
  unknown("weight layout", s, "out_in|in_out");
}

value_mode parse_value_mode(std::string_view s) {
  for (value_mode m : {value_mode::exact, value_mode::uniform, value_mode::wide, value_mode::cancel,
                       value_mode::nonfinite, value_mode::positive, value_mode::zero_inf})
    if (s == to_string(m)) return m;
  unknown("value mode", s, "exact|uniform|wide|cancel|nonfinite|positive|zero_inf");
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
  // Every tensor's bytes, and their sum, in the widest dtype: X, each W_l (and its dW_l), each
  // activation (M × d_l, including Y).
  const std::vector<std::int64_t> d = widths();
  std::int64_t total = checked_mul(checked_mul(M, K, "X elements"), 8, "X bytes");
  for (std::size_t l = 1; l < d.size(); ++l) {
    // "W" and "Y" for a single layer; "W1", "H1", "W2", "Y" in a stack.
    const std::string n = d.size() == 2 ? "" : std::to_string(l);
    const std::string out = l + 1 == d.size() ? "Y" : "H" + n;
    const std::int64_t w =
        checked_mul(checked_mul(d[l], d[l - 1], "W" + n + " elements"), 8, "W" + n + " bytes");
    const std::int64_t h = checked_mul(checked_mul(M, d[l], out + " elements"), 8, out + " bytes");
    total = checked_add(total, checked_add(checked_mul(w, 2, "W and dW bytes"), h, "bytes"),
                        "the problem's bytes");
  }
  // Headroom for the cost models, whose peaks add a few multiples of these tensors in plain
  // 64-bit arithmetic (column_parallel's 2·M·N, a pseudo-strategy's 3·M·N): up to 2⁵⁶ bytes
  // (64 PiB, far past any memory limit) any such sum of up to 128 of them fits.
  constexpr std::int64_t most = std::int64_t{1} << 56;
  if (total > most)
    throw invalid_problem("the problem's bytes: " + std::to_string(total) +
                          " are above 2^56 (64 PiB), the most its cost models are summed for");
}

std::int64_t checked_mul(std::int64_t a, std::int64_t b, std::string_view what) {
  std::int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out))
    throw invalid_problem(std::string(what) + ": " + std::to_string(a) + " × " + std::to_string(b) +
                          " does not fit in 64 bits");
  return out;
}

std::int64_t checked_add(std::int64_t a, std::int64_t b, std::string_view what) {
  std::int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out))
    throw invalid_problem(std::string(what) + ": " + std::to_string(a) + " + " + std::to_string(b) +
                          " does not fit in 64 bits");
  return out;
}

std::vector<std::int64_t> problem::widths() const {
  std::vector<std::int64_t> w{K};
  w.insert(w.end(), hidden.begin(), hidden.end());
  w.push_back(N);
  return w;
}

}  // namespace shardcheck
