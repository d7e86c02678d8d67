#pragma once
// The verdict: what an output of a case is judged against, and how. Every command that judges
// outputs calls it — verify (harness.cpp), compare, audit, verify --dump and the benchmarks — so
// that a bound or window is computed in one place only.
//
//   reference     the reference of a block of an output (a single layer), from exactly the inputs
//                 it depends on; of a whole stack (stack.hpp), sliced into blocks; of a whole
//                 single layer with its high-precision oracle (audit, --dump). bf16 / f16: the f32
//                 value b before its rounding, on the widened inputs (mixed.hpp).
//   tolerance     the bound of an element, both tiers: the rigorous (γ_k_par + γ_k_ref)·mag and
//                 the statistical (γ̃(λ), λ from the case's rounding events), a stack's per
//                 element through its layers, and a 16-bit case's window [round(b − δ),
//                 round(b + δ)] for its precision policy; exact mode: bitwise.
//   judge         one pass over a block: the first failing element (rigorous tier first, then
//                 the statistical one), the elements failing the non-finite rule, and the worst
//                 figures — err/(u·mag) and the share of each tier's bound used.
//   shares        the same shares for one computation against the oracle (audit).
//
// Example: f32, K = 64 on row_parallel at p = 2 (k_par = 33): an element of Y with mag = 10 is
// within (γ_33 + γ_64)·10·(1 + 7e-15) ≈ 5.8e-5 of the reference; its error 1.2e-6 uses 2.1 % of
// that bound and err/(u·mag) = 2.0.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "shardcheck/parallel/kernel.hpp"
#include "shardcheck/parallel/matrix.hpp"
#include "shardcheck/parallel/plan.hpp"
#include "shardcheck/reference/check.hpp"
#include "shardcheck/reference/mixed.hpp"
#include "shardcheck/reference/stack.hpp"

namespace shardcheck::prop {

// --- the case's values ------------------------------------------------------------------------

// The case's values of input t over the given runs of global rows and columns, packed in order:
// rows {0,2},{4,2} × cols {0,3} are global rows 0, 1, 4, 5 of columns 0-2. Throws
// invalid_problem when its size does not fit in memory's index range.
template <class T>
[[nodiscard]] par::matrix<T> case_values(const par::run_case& c, par::tensor_slot t,
                                         std::span<const par::index_run> rows,
                                         std::span<const par::index_run> cols);
template <class T>
[[nodiscard]] par::matrix<T> case_values(const par::run_case& c, par::tensor_slot t,
                                         std::int64_t row0, std::int64_t rows, std::int64_t col0,
                                         std::int64_t cols);
// Block `region` of input t in the case's dtype, as this rank of `plan` holds it: for an input
// placed P on a mesh axis, this coordinate's share of each element (ref::partial_share).
[[nodiscard]] par::any_matrix case_block(const par::run_case& c, const par::case_plan& plan,
                                         const par::tensor_plan& t);

// --- the statistical tier ---------------------------------------------------------------------

// The statistical tier's rounding events of case c (bound.hpp lambda_for): Σ over every judged
// product's elements of max(k_par, n) + n for a contraction of n terms — a union bound over
// every term of both computations' dot products (Higham & Mary's Theorem 3.1 fails with
// probability n·2·exp(−λ²(1 − u)²/2) for n terms, each within γ̃_k(λ) for its k ≤ chain rounding
// factors; a chain k_par shorter than n, as row-parallel's K/p + depth, still has n terms). A
// single layer's Y (forward) and dX, dW (backward), or every product of each of a stack's layers.
// One layer of 64×64×4096, both phases: 64·64·8192 + 64·4096·128 + 64·4096·128 = 1.0e8 events,
// λ = 8.93 at p_fail = 1e-9.
[[nodiscard]] double statistical_events(const par::run_case& c,
                                        std::span<const par::chain_lengths> chains, bool forward,
                                        bool backward);

// The statistical tier of a case (bound.hpp): λ from its rounding events, so that a correct
// kernel fails it with probability ≤ ref::statistical_p_fail, and that probability. λ = 0: off.
// On sign-symmetric data (data_aware_applies) also the data-aware bound's two λ (bound.hpp
// data_aware_bound): λ_a over every judged element's two computations, λ_d over every node of
// their summation trees; each element is then judged by the smaller of the two bounds for each
// computation. The probability is split: half to λ, a quarter each to λ_a and λ_d (0: off).
struct statistical_tier {
  double lambda = 0, p_fail = 0;
  double lambda_a = 0, lambda_d = 0;
  [[nodiscard]] bool data_aware() const { return lambda_a > 0; }
};

// Whether the data-aware bound can judge case c: a single f32 / f64 layer on sign-symmetric
// values (ref::signs_symmetric: uniform, wide, cancel) whose inputs reach the kernel whole
// (`partial_inputs`: some input is placed P, its shares' signs are not fair coins).
[[nodiscard]] bool data_aware_applies(const par::run_case& c, bool partial_inputs);
// Whether any tensor of the plan is placed P on some mesh axis.
[[nodiscard]] bool placed_partial(const par::case_plan& plan);

// The tier of case c judged with the kernel's chains (`claimed`: it claims them; off in exact
// mode, which is bitwise, and without chains), for the phases checked:
// - f32 / f64: statistical_events at the storage dtype's u;
// - a bf16 / f16 single layer: every output element × both chains, at the coarser u of the
//   policy's accumulation and reduction dtypes (mixed_windows_of);
// - a bf16 / f16 stack: statistical_events at that u (mixed_stack_tier).
// - with data_aware_applies(c, partial_inputs), λ_a and λ_d beside λ (statistical_tier).
[[nodiscard]] statistical_tier tier_of(const par::run_case& c,
                                       std::span<const par::chain_lengths> chains, bool forward,
                                       bool backward, bool claimed, bool partial_inputs);

// The windows output t of a bf16 / f16 single layer is judged by (reference/mixed.hpp): got within
// [round(b − δ), round(b + δ)] of the reference's f32 value b, δ = factor·mag. `rigorous` is
// f_par + γ_K(u_f32) for the kernel's chain k_par (of which k_red reduced); `statistical` the
// same with γ̃(λ), λ from the case's rounding events (0 in exact mode, which is bitwise).
struct mixed_windows {
  double rigorous = 0, statistical = 0, lambda = 0, events = 0;
  std::int64_t k_par = 0, k_red = 0;
};
[[nodiscard]] mixed_windows mixed_windows_of(const par::run_case& c,
                                             std::span<const par::chain_lengths> chains,
                                             par::tensor t);

// A bf16 / f16 stack (L > 1): the tier of its windows, from the rounding events of the phases
// checked and u the larger of the policy's accumulation and reduction dtypes (off in exact mode).
[[nodiscard]] statistical_tier mixed_stack_tier(const par::run_case& c,
                                                std::span<const par::chain_lengths> chains,
                                                bool forward, bool backward);

// --- the tolerance of an element --------------------------------------------------------------

// How the elements of one output block are judged. Its bound per element, from the `mag` the
// judge is given with it:
// - bitwise (exact mode): got equals the reference bit for bit (a 16-bit case: round(b));
// - a single layer in f32 / f64: rigorous·mag / (1 − γ_k_mag(f64)), the statistical tier's with
//   `statistical` for `rigorous` (ref::element_bound, bit for bit);
// - a bf16 / f16 single layer (window): [round(b − δ), round(b + δ)], δ = factor·mag inflated as
//   above, factor `rigorous` or `statistical` (ref::compare_window);
// - a stack (per_element): mag is each element's rigorous bound itself, and the judge's
//   stat_bound the statistical one (factor 1, no inflation); a 16-bit stack's are windows.
struct tolerance {
  dtype type = dtype::f64;  // the storage dtype of got
  bool bitwise = false, window = false, per_element = false;
  double rigorous = 0, statistical = 0;  // per unit of mag (single layer), 1 for a stack
  std::int64_t k_mag = 0;                // the chain mag itself was summed over (its rounding)
  statistical_tier tier;                 // λ = 0: the statistical tier is off
  // What the bound was made of, for messages: the chains, of which k_red reduced (16-bit).
  std::int64_t k_par = 0, k_red = 0, k_ref = 0;
  precision policy{};
};

// The chains of output t of a single layer: `chains` holds one per layer, zeros when the kernel
// claims none.
[[nodiscard]] std::int64_t chain_of(const par::chain_lengths& l, par::tensor t);
// Output t's inner (contraction) dimension: K for Y, N for dX, M for dW.
[[nodiscard]] std::int64_t inner_of(const problem& p, par::tensor t);
// The tolerance of output t of case c for the kernel's chains and the case's tier (tier_of):
// a single layer's from its chain, a stack's per element (its bounds come with its reference).
[[nodiscard]] tolerance tolerance_of(const par::run_case& c,
                                     std::span<const par::chain_lengths> chains, par::tensor t,
                                     const statistical_tier& tier);

// --- the reference of a block and of a whole stack --------------------------------------------

// The reference of one block of an output: its values (the case's dtype; f32 for bf16 / f16, the
// value b before its rounding) and per element its magnitude product |X||W|ᵀ — a stack's: its
// rigorous bound, with the statistical one and the magnitude product apart.
struct block_reference {
  par::any_matrix value;
  std::vector<double> mag;  // |X||W|ᵀ; a stack's rigorous bound
  std::int64_t k_ref = 0;
  std::int64_t flops = 0, panel_bytes = 0;  // what computing it took (verdict::check_flops)
  // A stack's: its statistical bound (empty when the tier is off) and its magnitude product.
  std::vector<double> stat_bound, stack_mag;
  // A single layer's Σ_k x_ik²·w_jk² ((X∘X)·(W∘W)ᵀ, in double) beside mag where the data-aware
  // bound applies (data_aware_applies; empty otherwise): +∞ where a term's two factors both
  // have a fixed sign (ref::fixed_sign).
  std::vector<double> sq;
  // The magnitude products errors are reported in (err / (u·mag)).
  [[nodiscard]] const std::vector<double>& unit_mag() const {
    return stack_mag.empty() ? mag : stack_mag;
  }
};

// The reference for block b of output t of a single layer, from exactly the inputs it depends
// on, summed over the inner indices `inner` only: [0, K) gives Y's block whole; [0, K/2) and
// [K/2, K), each on one rank, give two parts whose sum is it (exact-mode values sum exactly in
// any order). A bf16 / f16 case's is b on the widened inputs (inner must be whole).
[[nodiscard]] block_reference reference_of_block(const par::run_case& c, par::tensor t,
                                                 const par::block& b, par::index_run inner);

// Its values alone (as reference_of_block's `value`): what a diagnosis compares with.
[[nodiscard]] par::any_matrix reference_values_of_block(const par::run_case& c, par::tensor t,
                                                        const par::block& b, par::index_run inner);

// The reference of a single f32 / f64 layer's block (as reference_of_block) in two steps: its
// values at construction, its magnitude products |X||W|ᵀ only when add_magnitudes() asks for
// them, from the same panels (kept until drop_panels(); made again from the case's seed if
// dropped before). The judge needs an
// element's magnitude only where the kernel's value differs from the reference's: an element
// equal to it bit for bit (settled) holds under every bound and adds 0 to every error figure, so
// a block settled in every element is judged without them, with the same verdict and figures.
class staged_reference {
 public:
  staged_reference(const par::run_case& c, par::tensor t, const par::block& b,
                   par::index_run inner);
  [[nodiscard]] block_reference& reference() { return e_; }  // `mag` empty until add_magnitudes
  void add_magnitudes();
  void drop_panels();

 private:
  const par::run_case& c_;
  par::tensor t_;
  par::block b_;
  par::index_run inner_;
  block_reference e_;
  par::any_matrix a_, w_;  // the panels (ordered as the product reads them)
  bool has_magnitudes_ = false, panels_held_ = false;
};

// Whether got equals want (the reference's values, the same dtype: f32 or f64) in every element,
// bit for bit or both NaN: every element then holds at any bound, with an error of 0.
[[nodiscard]] bool settled(const par::any_matrix& got, const par::any_matrix& want);

// A single layer's whole outputs Y, dX, dW, each the reference of its whole block; and block b
// of output t sliced from the reference of its whole output.
[[nodiscard]] std::vector<block_reference> whole_references(const par::run_case& c);
[[nodiscard]] block_reference slice_of(const par::run_case& c, par::tensor_slot t,
                                       const par::block& b, const block_reference& whole);

// The chains of a stack's layers as stack_expect reads them, with their reductions' shares.
[[nodiscard]] ref::stack_chains stack_chains_of(std::span<const par::chain_lengths> layer_chains);

// The reference of a whole stack (L > 1) — every row of X and dY, so every output — and, per
// element, its bound (stack.hpp) for the strategy's chains per layer, and at λ > 0 the
// statistical tier's. `rows` (f32 / f64): only those rows of X, forward only (Y's rows are
// independent: the benchmarks check samples of them).
template <class T>
[[nodiscard]] ref::stack_expectation<T> whole_stack_reference(
    const par::run_case& c, std::span<const par::chain_lengths> chains, double lambda,
    const std::vector<par::index_run>* rows = nullptr);
// A bf16 / f16 stack's, in f32 on the widened inputs, its hidden tensors stored in the storage
// dtype as the kernel stores them (stack.hpp stack_storage), with each element's window
// half-width for the case's policy and at λ > 0 the statistical tier's.
[[nodiscard]] ref::stack_expectation<float> mixed_stack_reference(
    const par::run_case& c, std::span<const par::chain_lengths> chains, double lambda);

// Block b of stack output t, sliced from a whole stack's reference (its magnitude products may
// have been freed: then only its bounds).
template <class V>
[[nodiscard]] block_reference slice_stack(const par::run_case& c, par::tensor_slot t,
                                          const par::block& b,
                                          const ref::stack_expectation<V>& all);

// The reference of block b of Y for the kernel's chains per layer (λ > 0: with the statistical
// tier's bounds): a single layer's from the inputs it depends on; a stack's (f32 / f64) through
// its layers on b's rows only, forward only, each element's bounds with it. The benchmarks check
// sampled rows of their results with it.
[[nodiscard]] block_reference forward_reference(const par::run_case& c, const par::block& b,
                                                std::span<const par::chain_lengths> chains,
                                                double lambda);

// A stack's whole reference, computed the first time one of a rank's blocks needs it, with what
// it took: per layer 3 GEMMs of 2·M·d_{l−1}·d_l flops and their bounds' as many; X, dY and every
// W_l generated.
class stack_reference {
 public:
  // Block b of output t. \note computes the whole stack once per case.
  [[nodiscard]] block_reference block(const par::run_case& c, par::tensor_slot t,
                                      const par::block& b,
                                      std::span<const par::chain_lengths> chains, double lambda);
  std::int64_t flops = 0, panel_bytes = 0;

 private:
  std::variant<std::monostate, ref::stack_expectation<float>, ref::stack_expectation<double>> all_;
};

// A single layer's whole inputs and, per output (Y, dX, dW), the reference, the oracle and the
// magnitude product. k_ref: the reference's chain (K, N, M). T bf16 or f16 (mixed.hpp): the
// inputs widened to f32 (exact), the reference summed in f32 (`unrounded`, b) and rounded to T
// once, the oracle and magnitudes of the same exact products.
template <class T>
struct truth {
  std::vector<T> x, w, dy;
  struct output {
    std::string name;
    std::int64_t rows = 0, cols = 0, k_ref = 0;
    std::vector<T> reference;
    std::vector<float> unrounded;  // b, for bf16 and f16 only
    std::vector<double> oracle, magnitude;
    // Σ_k x_ik²·w_jk² where the data-aware bound applies (data_aware_applies) and no input value
    // has a fixed sign (ref::fixed_sign); empty otherwise.
    std::vector<double> squares;
  };
  output out[3];  // Y, dX, dW
};
// Throws invalid_problem for a stack (the oracle is a single layer's) or a size past memory.
template <class T>
[[nodiscard]] truth<T> whole_truth(const par::run_case& c);

// --- the judge --------------------------------------------------------------------------------

// The numbers behind the verdict on one output: the worst |got − expected| / (u·mag) over its
// finite elements (mag = |X||W|ᵀ, a stack's through its layers), and the worst share of each
// tier's bound used (|got − expected| / bound; 1 is at the bound). −1: nothing judged there; the
// tiers stay −1 in exact mode, which is bitwise. bf16 and f16 (a window, mixed.hpp): expected is
// the reference's unrounded f32 value b and u the storage dtype's, so a correct kernel's round(b)
// reads up to about 1; a tier's share is ref::window_share's (> 1: outside that window).
struct error_cell {
  double err_u_mag = -1, rigorous = -1, statistical = -1;
};

// One block judged: the first failing element in row-major order (a rigorous failure first, then
// the first element above the statistical bound only, reason "statistical"), the elements that
// fail the non-finite rule (NaN where the reference is NaN, its own Inf; a window may reach an
// Inf past the storage range), the worst figures, and the largest |got − expected| over the
// finite elements.
struct judgement {
  std::optional<ref::mismatch> first;
  std::int64_t nonfinite = 0;
  error_cell worst;
  double max_err = 0;
  bool statistical = false;  // `first` failed the statistical tier only
  double reference = 0;      // a window's: the f32 reference b at `first`
};

// Judges got (rows×cols, row-major) against want (laid out alike: the case's dtype, f32 for a
// 16-bit T) with the per-element mag (tolerance above), stat_bound (each element's statistical
// bound itself: a stack's, or data_aware_bounds'; null otherwise) and unit_mag, the magnitudes
// err/(u·mag) is reported in (mag itself for a single layer).
template <class T>
[[nodiscard]] judgement judge_block(const tolerance& tol, std::size_t rows, std::size_t cols,
                                    const T* got, const wide_t<T>* want, const double* mag,
                                    const double* stat_bound, const double* unit_mag);
// Each element's statistical bound where the data-aware bound judges the block (tol's tier has
// it and want has sq): per computation (the kernel's chain k_par, the reference's k_ref) the
// smaller of γ̃_k(λ)·mag and ref::data_aware_bound, summed; mag and sq inflated for their own
// rounding in double, the sum for its own. Empty where it does not judge.
[[nodiscard]] std::vector<double> data_aware_bounds(const tolerance& tol,
                                                    const block_reference& want);
// The same for a block of any dtype against its reference. A single f32 / f64 layer's reference
// may come without its magnitudes (staged_reference) only for a block settled against it: its
// judgement is then the one every settled block gets (no failure, every figure 0); unsettled,
// it throws.
[[nodiscard]] judgement judge_block(const tolerance& tol, const par::any_matrix& got,
                                    const block_reference& want);

// The first failing element described: "Y[i=3, j=1] on rank 1 at local (3, 1): got …, expected
// …, bound … (k_par=33, k_ref=64), error = 1.4e+03·u·mag [value]". `where` names the element.
[[nodiscard]] std::string describe(const judgement& j, const tolerance& tol,
                                   const std::string& where);

// --- the projection tier ------------------------------------------------------------------------

// A second way to judge a single f32 / f64 layer's output block B (rows R, columns C, inner
// dimension d, from the panels A_R, W_C the reference would use), in O(m·(|R|·d + |C|·d)) work
// and O(|R|·m + |C|·m + d·m) memory beyond the panels instead of the reference's O(|R|·|C|·d):
// with m = projection_vectors sign vectors v_1 … v_m ∈ {±1}^C, independent Rademacher signs drawn
// from the case's seed and the output (projection_signs: every rank and replay draws the same),
// each row i compares g_ir = (B̂·v_r)_i, the kernel's block projected in double, with
// r_ir = (A_R·(W_Cᵀ·v_r))_i in double. For a correct kernel, e_ij = B̂_ij − B_ij is within the
// element tier's bound b_ij = γ·mag_ij (mag = |A|·|W|ᵀ, γ the kernel's chain's γ_k_par: r is the
// exact product up to its own rounding, bounded below, so no γ_k_ref), and
//   rigorous:     every vector's |Σ_j v_rj e_ij| ≤ Σ_j b_ij = γ_kpar·(|A_R|·(|W_C|ᵀ·1))_i
//                 = γ_kpar·S_i;
//   statistical:  the v_r are independent of the errors and of each other, so the mean of the m
//                 squares (Σ_j v_rj e_ij)² is dominated by σ_i² = Σ_j e_ij² times a χ² of m
//                 degrees of freedom over m (ref::rms_lambda_for), and Σ_j e_ij² ≤
//                 γ̃²·max_j mag_ij·S_i ≤ γ̃²·X_i·S_i with X_i = (|A_R|·max_j|W_C|)_i ≥
//                 max_j mag_ij: the rows' root mean square error within λ_v·γ̃_kpar(λ)·√(X_i·S_i).
// To both is added the rounding of the check itself (per vector; the root mean square of errors
// each within it is too), in double (u = 2⁻⁵³) with compensated sums (Ogita, Rump & Oishi's Sum2
// and Dot2, error-free transformations): W_Cᵀ·v_r as pairs hi + lo, r_ir by Dot2 over the 2d
// terms a_ik·hi_kr, a_ik·lo_kr and rounded once, within (2u + 2γ_q + 2γ_{2d+1}² + γ_C²)·S_i (q the
// parts it is summed from: the holders of a replicated block split d among them, their parts
// added in double), and g_ir by Sum2, within (2u + γ_C²)·Σ_j|B̂_ij| — about (q + 2)·u·S_i, against
// the (C + d)·u·S_i of plain sums, which would outweigh the statistical bound in f64. S_i, X_i and
// Σ_j|B̂_ij|, sums of nonnegative terms in double, are inflated by 1/(1 − γ_{C+d+q+2}). The
// statistical tier keeps the element tier's false-alarm budget per case, ref::statistical_p_fail,
// split in halves: λ for the element bounds' rounding events (statistical_events) at p/2, λ_v over
// every projected row of the case (p ranks × the rows of each judged output, each rank's block at
// most all of them) at p/2.
//
// Why m vectors and their mean square: one vector's error (Σ_j v_j e_ij) is σ_i times a single
// draw of about unit size, which Hoeffding's λ_v (≈ 8 over 10⁵ rows) must cover; an error of rank
// one (e_ij = x_i·y_j: a dropped or doubled term of the contraction) draws the same factor
// Σ_j v_j·y_j on every row, so its largest row gains nothing from the number of rows and reads
// λ_v/|draw| times its σ. The mean of m squares concentrates: λ_v = 3.42 at m = 8 over 10⁵ rows.
//
// Inputs of one magnitude (|a|, |w| ≈ m) give S_i ≈ C·d·m², X_i ≈ d·m²: the statistical bound is
// then λ_v·(γ̃/γ)/√C of the rigorous one. It rests on the elements' bounds, not on their errors'
// size: a correct kernel uses a few 1e-3 of it or less, where the element tier's statistical share
// is ~0.05, so a defect just above the element tier's statistical bound can pass it.
//
// What it declines (the element tier judges instead): a stack (L > 1), a bf16 / f16 case (its
// windows are around the rounded reference, not additive bounds), exact mode (bitwise), and a
// block whose output or panels hold a NaN or Inf (projection_judgement::declined: that block alone
// goes to the element tier, with its non-finite rule).

// The number of sign vectors m each projected row is judged on.
inline constexpr int projection_vectors = 8;

// The size above which check=auto judges by projection: 2^33 multiply-adds per output (M·N·K for
// each of Y, dX, dW), beyond 2048³. The element tier's reference costs the kernel's own work
// again, plus its magnitudes where a block differs (verify at 2048³ = 2^33 on data_parallel,
// p = 2: 4.5× the kernel's step in f64), and grows as n³: at 4096³ its check took 4.1 s of a
// rank's time against the projection's 0.65 s (one vector; 1.7–1.8 s with eight). Below it, the
// element tier's per-element verdict, its diagnosis of the error's shape and its bitwise settling
// cost seconds at most and say more.
inline constexpr double projection_threshold = 0x1p33;

// Why case c cannot be judged by projection ("a stack", "bf16 storage", "exact mode"), or "".
[[nodiscard]] std::string projection_declines(const par::run_case& c);
// Whether c's outputs are judged by projection: check=projection, or auto with M·N·K above
// projection_threshold — and projection_declines(c) empty (else the element tier judges).
[[nodiscard]] bool judged_by_projection(const par::run_case& c);

// The projection tier of a case: λ for the element bounds' rounding events and λ_v for its
// projected rows (ref::rms_lambda_for over projection_vectors), each at half of
// ref::statistical_p_fail, and the false-alarm probability they make together. λ = 0: the
// statistical tier is off (exact mode, no chains).
struct projection_tier {
  double lambda = 0, lambda_v = 0, p_fail = 0, rows = 0;
  // The data-aware bound's (statistical_tier), over the kernel's computation alone; 0: off.
  double lambda_a = 0, lambda_d = 0;
};
[[nodiscard]] projection_tier projection_tier_of(const par::run_case& c,
                                                 std::span<const par::chain_lengths> chains,
                                                 bool forward, bool backward, bool claimed,
                                                 bool partial_inputs);

// The signs v_rj (±1) of output t's global columns `cols` for the projection_vectors vectors r,
// column-major: v[j·m + r]. A pure function of (seed, output, vector, column): counter_hash on a
// stream no input uses.
[[nodiscard]] std::vector<double> projection_signs(const par::run_case& c, par::tensor t,
                                                   std::span<const par::index_run> cols);

// Both bounds of one projected row from its sums (computed in double): S = Σ_j mag_ij,
// X ≥ max_j mag_ij, G = Σ_j |B̂_ij|, for C columns, inner dimension d in q parts, γ_kpar and
// γ̃_kpar(λ) (0: tier off, the statistical bound is then the rigorous one) and λ_v.
struct projection_bound {
  double rigorous = 0, statistical = 0;
};
[[nodiscard]] projection_bound projection_bound_of(double sum_mag, double max_mag, double sum_got,
                                                   std::int64_t cols, std::int64_t inner, int parts,
                                                   double gamma, double gamma_tilde,
                                                   double lambda_v);
// The data-aware statistical bound of the same row (projection_tier's λ_a, λ_d; off: +∞), from
// Q = Σ_j q_ij = Σ_k a_ik²·Σ_j w_jk² beside S and X: the χ²_m root mean square over the m vectors
// (ref::rms_lambda_for's λ_v) on the elements'
// data-aware bounds b_ij (ref::data_aware_bound for the kernel's chain k), whose
// √(Σ_j b_ij²) ≤ λ_a·u·√(k·(λ_d·√Q + γ_k·√(X·S))² + Q) by Minkowski's inequality over j; plus
// the check's own rounding, as projection_bound_of's.
[[nodiscard]] double projection_data_aware_of(double sum_sq, double sum_mag, double max_mag,
                                              double sum_got, std::int64_t cols, std::int64_t inner,
                                              int parts, std::int64_t k, dtype t,
                                              const projection_tier& pt);

// One block judged by projection: its worst projected row (local index; the one with the largest
// share of the rigorous bound, or, when only the statistical bound is exceeded, of that one), its
// errors there — the largest |g_r − r_r| over the vectors (err_max, on vector `vector`, against the
// rigorous bound) and their root mean square (err, against the statistical bound) — and the worst
// shares of each bound over its rows.
struct projection_judgement {
  bool declined = false;  // a NaN or Inf in the block or its panels: the element tier judges it
  bool failed = false, statistical = false;  // failed the statistical bound only
  std::int64_t row = -1;
  int vector = 0;
  double err = 0, err_max = 0, rigorous = 0, stat_bound = 0, got = 0, expected = 0;
  error_cell worst;  // err_u_mag stays −1: a projection has no per-element magnitude
  std::int64_t flops = 0, panel_bytes = 0;
};
// The reference side of block b's projection over the inner indices `inner` (all of them, or a
// part: the parts' r, S and X add up to the whole's): per row r_ir (r[i·m + r], m =
// projection_vectors), S_i and X_i, and whether every panel value was finite (else the block is
// declined).
struct projection_sums {
  std::vector<double> r, sum, max;
  // Q_i = Σ_k a_ik²·Σ_j w_jk² where the data-aware bound applies (empty otherwise), +∞ in a row
  // with a term of two fixed-sign factors.
  std::vector<double> sq;
  bool finite = true;
  std::int64_t flops = 0, panel_bytes = 0;
};
[[nodiscard]] projection_sums projection_sums_of(const par::run_case& c, par::tensor t,
                                                 const par::block& b, par::index_run inner);
// Judges got (block b of output t) against `sums` over the whole inner dimension, made of `parts`
// parts summed in any order (their sum's roundings join r's chain).
[[nodiscard]] projection_judgement judge_projection(const par::run_case& c, par::tensor t,
                                                    const par::block& b, const par::any_matrix& got,
                                                    const projection_sums& sums, int parts,
                                                    const tolerance& tol,
                                                    const projection_tier& pt);
// The same with the sums over the whole inner dimension, computed here.
[[nodiscard]] projection_judgement project_block(const par::run_case& c, par::tensor t,
                                                 const par::block& b, const par::any_matrix& got,
                                                 const tolerance& tol, const projection_tier& pt);
// "<block_where>, projected on 8 sign vectors v over the block's columns: on v_r, (got·v)_i = …,
// (A·(Wᵀ·v))_i = …, error e = q·rigorous bound b (k_par=…); over the 8, root mean square error
// e' = q'·statistical bound b' (λ=…, λ_v=…, …) [projection]".
[[nodiscard]] std::string describe(const projection_judgement& j, const tolerance& tol,
                                   const projection_tier& pt, const std::string& block_where);

// --- the shape of the error (on failure only) ---------------------------------------------------

// What a failing block's difference between the kernel's output C and the reference R looks like,
// tried in this order on the block's out-of-bound elements (each out of the judge's bound: the
// rigorous tier's, or the statistical one's when only that failed). A shape "fits" when C, after
// the shape is applied to R, is within the same bound on every element the shape covers — never a
// fixed epsilon (exact mode: bit for bit):
//   nonfinite         NaN or Inf in C where R is finite;
//   lost_nonfinite    C not NaN where R is NaN, or finite where R is Inf (a product skipped:
//                     0·Inf or a NaN input never reached the sum);
//   zero              C = 0 on the out-of-bound elements (a block left untouched or dropped);
//   multiple          C = k·R there, 2 ≤ k ≤ max(p, 2), within k times the bound (a reduction
//                     counted k times), or C = R/k within the bound (a sum divided by k: an
//                     average over the wrong group, a scale applied twice);
//   permuted          C holds another rank's block (C = R_q on the whole block), or the block's row
//                     or column shards (n equal parts, n from the case's mesh and 2…8) in another
//                     order, or a run of its rows or columns reversed;
//   shifted           as permuted, every misplaced shard the same number of shards on in the same
//                     direction (the harness: every failing rank holding its neighbour's block);
//   transposed        C = Rᵀ (a square block);
//   partial_only      C = P_r: only part r of the inner dimension summed (a reduction skipped or
//                     stopped early), P_r the reference over the r-th of n equal parts;
//   partial_missing   C = R − P_r;  partial_twice  C = R + P_r;
//   narrower          within the bound recomputed with a coarser dtype: f32 for the kernel's
//                     whole chain, f16 / bf16 for its inputs and reduced partial sums only (a
//                     16-bit window's and a stack's: the factor scaled by the unit roundoffs);
//   other             none of these.
enum class error_shape : int {
  none,
  nonfinite,
  lost_nonfinite,
  zero,
  multiple,
  permuted,
  shifted,
  transposed,
  partial_only,
  partial_missing,
  partial_twice,
  narrower,
  other
};
[[nodiscard]] std::string_view to_string(error_shape s);

// What a diagnosis may compare a failing block with besides its reference (all laid out as it).
struct diagnosis_context {
  int ranks = 1;                          // p: the largest multiple tried
  std::vector<int> shard_counts;          // shard counts tried besides 2…8 (the mesh's axes)
  std::vector<std::int64_t> shard_sizes;  // shards of these sizes (the case's parameters)
  // P of part `index` of `count` parts of the inner dimension (the reference summed there):
  // rank `rank`'s share of it, or (rank −1) the index-th of `count` equal parts.
  struct part {
    int count = 0, index = 0, rank = -1;
    std::vector<double> value;
  };
  std::vector<part> partials;
  // Local rows (columns) of the block where a rank's part of that dimension starts or ends: the
  // ranks' partition, tried as shards before the equal ones.
  std::vector<std::size_t> row_cuts, col_cuts;
  // The reference of another rank's block of the same shape (rank ≥ 0), or of the block moved
  // elsewhere in its output (rank −1, `what` says where: "the reference's rows 17-33").
  struct other {
    int rank = 0;
    std::vector<double> value;
    std::string what;
  };
  std::vector<other> others;
};

// The diagnosis of a failing block: its out-of-bound elements (local rows and columns holding
// them, as runs) and the first shape that fits.
struct diagnosis {
  error_shape shape = error_shape::none;
  std::int64_t bad = 0, elements = 0;
  std::vector<par::index_run> rows, cols;  // local indices
  int k = 0;  // multiple: C = k·R, or C = R/|k| when k < 0; shifted (shards): by k shards
  int part = -1, parts = 0;  // partial_*: P_part of `parts`
  int rank = -1;  // permuted / shifted across ranks: whose block C holds; partial_*: whose share
  std::string detail;  // the shards' order, the coarser dtype, …
};

// Diagnoses got against want (as judge_block takes them) with the tier that failed (`statistical`:
// the statistical bound, stat_bound a stack's). An empty diagnosis (shape none) when every element
// is within the bound. \note runs only on failure: it costs up to ~40 passes over the block.
template <class T>
[[nodiscard]] diagnosis diagnose_block(const tolerance& tol, bool statistical, std::size_t rows,
                                       std::size_t cols, const T* got, const wide_t<T>* want,
                                       const double* mag, const double* stat_bound,
                                       const diagnosis_context& ctx);
[[nodiscard]] diagnosis diagnose(const tolerance& tol, const judgement& j,
                                 const par::any_matrix& got, const block_reference& want,
                                 const diagnosis_context& ctx);
// The values of a reference as doubles (for diagnosis_context).
[[nodiscard]] std::vector<double> values_of(const par::any_matrix& m);

// "zero: 0 where out of bound (16 of 64 elements: rows 0-7, columns 8-9)", in b's global indices.
[[nodiscard]] std::string describe(const diagnosis& d, const par::block& b);
// The shape a failure's message names ("forward: Y[…] …; shape: zero, …" names "zero"), or "".
[[nodiscard]] std::string shape_named(std::string_view message);

// --- shares against the oracle (audit) --------------------------------------------------------

// The share of a tier's bound one computation with chain k used, from its largest error in
// u·mag against the oracle (itself one rounding to double from exact, ≤ u_f64·mag): the rigorous
// tier allows (γ_k + u_f64)·mag, the statistical (γ̃_k(λ) + u_f64)·mag with λ for
// `elements`·k roundings at ref::statistical_p_fail.
struct oracle_shares {
  double rigorous = 0, statistical = 0, lambda = 0;
  double data_aware = -1;  // data_aware_share's; −1: not measured
};
[[nodiscard]] oracle_shares oracle_shares_of(double max_u_mag, std::int64_t k,
                                             std::int64_t elements, dtype t);
// The share of the data-aware bound (ref::data_aware_bound) one computation with chain k used,
// the largest over the elements of |got − oracle| / (bound + u_f64·mag), λ_a over the elements and
// λ_d over their trees' nodes, each at half of ref::statistical_p_fail. −1 without squares.
[[nodiscard]] double data_aware_share(const std::vector<double>& got,
                                      const std::vector<double>& oracle,
                                      const std::vector<double>& mag,
                                      const std::vector<double>& squares, std::int64_t k, dtype t);
// bf16 and f16: the share of the window of one computation used, over the elements
// (ref::window_share; > 1 is outside it). The window is around the oracle s (one rounding from
// exact, ≤ u_f64·mag): the stored value must lie in [round_down(s − δ), round_up(s + δ)],
// δ = (f + u_f64)·mag with f the computation's factor: the parallel result's policy_factor over its
// chain's local and reduced parts, the reference's γ_K(u_f32) (no policy: it sums in f32 and
// rounds once). The statistical tier's f takes γ̃_k(λ) for each γ_k, λ = lambda_for(elements·k,
// 1e-9, u) with u the coarsest of the policy's acc and reduce dtypes.
[[nodiscard]] oracle_shares oracle_window_shares(const std::vector<double>& got,
                                                 const std::vector<double>& oracle,
                                                 const std::vector<double>& mag, std::int64_t k_loc,
                                                 std::int64_t k_red, std::int64_t k_mag,
                                                 dtype storage,
                                                 const std::optional<precision>& policy);
// A tier's bound of one computation with chain k, in units of u: γ_k/u (λ = 0) or γ̃_k(λ)/u.
[[nodiscard]] double tier_bound_in_u(std::int64_t k, dtype t, double lambda);

}  // namespace shardcheck::prop
