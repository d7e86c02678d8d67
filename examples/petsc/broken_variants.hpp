// Two claims an adapter to PETSc can get wrong, each a kernel that must fail (negative tests in
// CMakeLists.txt): petsc_dense with one allocation or one MPI call left out of its cost model.
#pragma once
#include "petsc_dense.hpp"

namespace mylab {

// The peak bound without one work array: out_in's forward without MatMatTransposeMult's gathered
// W (N·K doubles), every backward without MatTransposeMatMult's reduce-scatter send buffer (N·K
// doubles), on more than one rank (one rank's MATSEQDENSE products have neither). memory fails on
// a case where that array is larger than the bound's slack.
class forgets_buffer final : public petsc_dense {
 public:
  forgets_buffer() : petsc_dense("petsc_dense.forgets_buffer") {}
  sc::claims cost(const sc::run_case& c, std::span<const int> coords) const override {
    auto out = petsc_dense::cost(c, coords);
    if (c.p == 1) return out;
    const std::int64_t nk = c.prob.N * c.prob.K * std::int64_t{sizeof(double)};
    if (c.prob.layout == shardcheck::weight_layout::out_in) out.peak->forward -= nk;
    out.peak->backward -= nk;
    return out;
  }
};

// The ledger without the forward's last MPI call (the assembly of Y on more than one rank, a
// layout's set-up on one).
class misses_call final : public petsc_dense {
 public:
  misses_call() : petsc_dense("petsc_dense.misses_call") {}
  sc::claims cost(const sc::run_case& c, std::span<const int> coords) const override {
    auto out = petsc_dense::cost(c, coords);
    out.collectives->forward.pop_back();
    return out;
  }
};

}  // namespace mylab
