#pragma once
// The final shrinking pass's step: every case one simplification away from a failing one. The
// driver runs them in order after RapidCheck's shrinking and moves to the first that still
// fails, until none does (a local minimum). From
//   p=4 M=3 N=2 K=5 mode=nonfinite seed=77 backend=native part.M=0,0,0,3
// the candidates are, in order (shrink_test.cpp checks this list):
//   fewer workers  p=1 part.M=3; p=2 part.M=0,3 (empty parts removed, the last first, then the
//                  last parts merged), p=2 part.M=2,1 (balanced); p=3 part.M=0,0,3, p=3
//                  part.M=1,1,1. divides_p parameters become gcd(value, what p leaves).
//   a dimension    M=0 (part.M=0,0,0,0: cut at the new length), M=1 (0,0,0,1), M=2; N=0, N=1;
//                  K=0, K=1, K=2, K=4 — 0, 1, half, minus one; likewise each hidden width of a
//                  stack, after a stack one layer shorter; then act=identity
//   the mode       mode=exact (in f64 where a stack's exact sums would round in f32, as the
//                  generators do), then mode=uniform from wide, cancel or nonfinite
//   the backend    backend=mpi (the simpler one: native is never tried from mpi)
//   a parameter    its default (param_spec::fallback); none here, gather=1 is data_parallel's
//   a partition    balanced: part.M=1,1,1,0
//   the seed       seed=0
// Every candidate is completed and validated for the kernel; those it rejects are left out, and
// nothing a run pins (case_pins: --backend, --p, --param) changes; a pinned M, N or K (--M, --N,
// --K) shrinks only inside its range. dtype changes only by exact
// mode's rule: f64 is not simpler than f32, nor f32 than f64. Each step makes smaller a measure
// (p, then layers, the sum of the widths, act, mode, backend, parameters off their default,
// unbalanced partitions, seed ≠ 0, compared in that order), so the pass ends.
#include <functional>
#include <vector>

#include "shardcheck/parallel/kernel.hpp"
#include "shardcheck/properties/generators.hpp"

namespace shardcheck::prop {

// The cases one simplification away from c (a complete, valid case of k), simplest kinds
// first, without duplicates and without c itself. No MPI.
[[nodiscard]] std::vector<par::run_case> simpler(const par::run_case& c, const par::kernel& k,
                                                 const case_pins& pins = {});

// How long the pass may go on: at most `runs` calls of the predicate, and none begun after
// `seconds` (a slow kernel must not stall CI).
struct shrink_budget {
  int runs = 200;
  double seconds = 60;
};
struct local_minimum {
  par::run_case c;
  int runs = 0;          // calls of `fails`
  bool reached = false;  // no case of simpler(c) fails; false: the budget ran out first
};
// From failing case c: asks fails(d) of each d in simpler(c), in order, moves to the first that
// fails and starts again from it, until none fails or the budget is spent.
[[nodiscard]] local_minimum shrink_to_local_minimum(
    const par::run_case& c, const par::kernel& k, const case_pins& pins, shrink_budget budget,
    const std::function<bool(const par::run_case&)>& fails);

}  // namespace shardcheck::prop
