#pragma once
// Vocabulary shared by every part of shardcheck: element types, weight layouts, value modes,
// the problem, and the error hierarchy.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace shardcheck {

struct error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// A problem, case or replay line that cannot be run (negative size, unknown name, ...).
struct invalid_problem : error {
  using error::error;
};
// An MPI call returned an error code.
struct mpi_error : error {
  using error::error;
};

// bf16 and f16 are storage dtypes (Eigen::bfloat16, Eigen::half, mixed.hpp): a case in them also
// carries a precision policy (below) for how its sums are formed.
enum class dtype { f32, f64, bf16, f16 };
inline constexpr std::size_t dtype_count = static_cast<std::size_t>(dtype::f16) + 1;
// A mixed-precision policy, for a case stored in bf16 or f16: `acc` the dtype a rank's local
// products are summed in, `reduce` the dtype partial sums travel in and are added in across ranks
// (f32 or the storage dtype). On a replay line: `dtype=bf16 acc=f32 reduce=bf16`. Cases in f32
// and f64 have none (everything happens in their own dtype).
struct precision {
  dtype acc = dtype::f32, reduce = dtype::f32;
  friend bool operator==(const precision&, const precision&) = default;
};
// out_in: W is N×K and Y = X·Wᵀ (torch.nn.Linear); in_out: W is K×N and Y = X·W.
enum class weight_layout { out_in, in_out };
// exact: multiples of 1/8 in [-1, 1]; every sum is exact, so results must agree bit for bit.
// uniform: uniform in [-1, 1]. wide: random sign and mantissa, exponents over [-16, 16].
// cancel: terms of ±2^12 scale mixed with small ones, so sums cancel and small terms are lost.
// nonfinite: uniform, with about one element in 32 replaced by NaN, +Inf or -Inf.
// zero_inf: uniform, with one element in four an exact zero (+0 or −0) and, in about one row in
// eight and one column in eight of each tensor, half the elements where they cross NaN, +Inf or
// −Inf: 0·Inf = NaN terms reach the sums, and most outputs stay finite (the rows and columns
// hold the non-finite values whatever K is, so a sum meets a few, not K/32).
// positive: uniform in [0, 1) (what a ReLU layer feeds): nothing cancels, |Y| = |X||W|ᵀ, so a
// bound relative to |X||W|ᵀ is relative to the result itself. With mean-zero data at K = 16384,
// |Y| is ~√K against |X||W|ᵀ ~ K, and any bound relative to |X||W|ᵀ spans several ulps of Y.
enum class value_mode { exact, uniform, wide, cancel, nonfinite, positive, zero_inf };
// How many there are, for tables indexed by them (the last enumerator + 1).
inline constexpr std::size_t value_mode_count = static_cast<std::size_t>(value_mode::zero_inf) + 1;
// Between the layers of a stack (stack.hpp): identity, or relu(h) = h > 0 ? h : 0.
enum class activation { identity, relu };

[[nodiscard]] std::string_view to_string(dtype t);
[[nodiscard]] std::string_view to_string(weight_layout l);
[[nodiscard]] std::string_view to_string(value_mode m);
[[nodiscard]] std::string_view to_string(activation a);
// Parsers throw invalid_problem naming the accepted spellings.
[[nodiscard]] dtype parse_dtype(std::string_view s);
[[nodiscard]] weight_layout parse_weight_layout(std::string_view s);
[[nodiscard]] value_mode parse_value_mode(std::string_view s);
[[nodiscard]] activation parse_activation(std::string_view s);

[[nodiscard]] constexpr std::size_t size_of(dtype t) {
  return t == dtype::f64 ? 8 : t == dtype::f32 ? 4 : 2;
}
// bf16 or f16: stored in 2 bytes, computed through a precision policy.
[[nodiscard]] constexpr bool is_storage16(dtype t) { return t == dtype::bf16 || t == dtype::f16; }
// "acc=f32 reduce=bf16".
[[nodiscard]] std::string to_string(const precision& p);
// Throws invalid_problem unless acc and reduce are each f32 or `storage` (a 16-bit dtype).
void validate_policy(dtype storage, const precision& p);

// Checked size arithmetic: the exact result, or invalid_problem naming `what` when it does not
// fit in 64 bits. checked_mul(1 << 40, 1 << 30, "Y elements") throws "Y elements: 2^40 × 2^30 …".
[[nodiscard]] std::int64_t checked_mul(std::int64_t a, std::int64_t b, std::string_view what);
[[nodiscard]] std::int64_t checked_add(std::int64_t a, std::int64_t b, std::string_view what);

template <class T>
constexpr dtype dtype_of();
template <>
constexpr dtype dtype_of<float>() {
  return dtype::f32;
}
template <>
constexpr dtype dtype_of<double>() {
  return dtype::f64;
}

// One linear layer: X is M×K, W is N×K (out_in) or K×N (in_out), Y is M×N.
// Backward, given dY (M×N): dX = dY·W (M×K) for out_in, dY·Wᵀ for in_out; dW = dYᵀ·X (N×K) for
// out_in, Xᵀ·dY (K×N) for in_out. Zero-sized dimensions are legal.
// A stack of layers (stack.hpp) adds hidden widths: K → hidden[0] → … → N, with `act` between
// layers; no hidden widths is the single layer.
struct problem {
  std::int64_t M = 0, N = 0, K = 0;
  dtype type = dtype::f64;
  weight_layout layout = weight_layout::out_in;
  std::vector<std::int64_t> hidden{};
  activation act = activation::identity;
  // Throws invalid_problem on a negative dimension, an activation without hidden widths, or a
  // tensor whose byte count (elements × 8, for either dtype) does not fit in 64 bits.
  void validate() const;
  [[nodiscard]] std::size_t layers() const { return hidden.size() + 1; }
  // d_0 = K, the hidden widths, d_L = N.
  [[nodiscard]] std::vector<std::int64_t> widths() const;
  [[nodiscard]] std::int64_t w_rows() const { return layout == weight_layout::out_in ? N : K; }
  [[nodiscard]] std::int64_t w_cols() const { return layout == weight_layout::out_in ? K : N; }
};

}  // namespace shardcheck
