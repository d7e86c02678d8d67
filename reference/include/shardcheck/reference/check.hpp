#pragma once
// Judging one computed block against the reference block, element by element.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "shardcheck/reference/types.hpp"

namespace shardcheck::ref {

struct mismatch {
  std::size_t row = 0, col = 0;  // local indices in the block
  double got = 0, expected = 0;
  double bound = 0;  // 0 in exact mode (bitwise required)
  double ratio = 0;  // |got − expected| / (u · mag): error in units of roundoff·magnitude;
                     // / bound for a stack's and for "statistical"
  // "value", "bitwise", "nonfinite" (NaN/Inf position or sign differs), "statistical" (within
  // the rigorous bound, above the statistical one: `bound` is the statistical one)
  std::string reason;
};

struct compare_options {
  bool bitwise = false;       // exact mode: every element must match bit for bit
  std::int64_t k_par = 0;     // longest chain of additions of the computation under test
  std::int64_t k_ref = 0;     // chain length of the reference (the contraction length)
  std::int64_t k_mag = 0;     // chain length used to compute mag (the contraction length)
  bool mag_is_bound = false;  // mag already holds each element's bound (a stack's, stack.hpp)
  // The statistical tier (bound.hpp), off at λ = 0: each element also within
  // (γ̃_k_par(λ) + γ̃_k_ref(λ))·mag, or, when stat_bound is given (a stack's, or the data-aware
  // bound's), within stat_bound (laid out like mag) whatever λ is.
  double lambda = 0;
  const double* stat_bound = nullptr;
};

// Compares got against expected (rows×cols, leading dimensions ld_got / ld_exp) with the
// per-element bound (γ_k_par + γ_k_ref)·mag (mag: rows×cols, ld_mag). Where expected is NaN, got
// must be NaN; where it is ±Inf, got must be the same Inf; elsewhere got must be finite and within
// the bound. Returns the first failing element in row-major order, or nothing. With the
// statistical tier on, an element within the rigorous bound but above the statistical one fails
// as "statistical" — reported only when no element fails the rigorous bound (which stays the hard
// verdict): the first such element in row-major order.
template <class T>
[[nodiscard]] std::optional<mismatch> compare_block(std::size_t rows, std::size_t cols,
                                                    const T* got, std::size_t ld_got,
                                                    const T* expected, std::size_t ld_exp,
                                                    const double* mag, std::size_t ld_mag,
                                                    const compare_options& opt);

}  // namespace shardcheck::ref
