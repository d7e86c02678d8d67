// Three defects an adapter to ScaLAPACK can have, each a kernel that must fail (negative tests in
// CMakeLists.txt). In the first two the local arrays hold the right tiles, but the descriptor
// PDGEMM reads describes them wrongly. Both stay inside the arrays (they are sized for any
// source's share), so the results are wrong, not a crash. The third computes right and claims
// too little memory.
#pragma once
#include "pblas_gemm.hpp"

namespace mylab {

// The first block's grid row and column off by one (RSRC + 1 mod pr, CSRC + 1 mod pc): PDGEMM
// reads every tile as a neighbour's. With one rank there is no neighbour; on a 1 × 2 grid the
// columns of Y are permuted against the rows of W.
class wrong_source final : public pblas_gemm {
 public:
  wrong_source() : pblas_gemm("pblas_gemm.wrong_source") {}

 protected:
  void describe(const layout_params& at, int rows, int cols, int lld, int* desc) const override {
    layout_params shifted = at;
    shifted.rsrc = (at.rsrc + 1) % at.pr;
    shifted.csrc = (at.csrc + 1) % at.pc;
    pblas_gemm::describe(shifted, rows, cols, lld, desc);
  }
};

// The leading dimension without its pad: column j of a local array is read at j·(lld − pad)
// instead of j·lld (a case with pad = 0, or one local column, hides it).
class mislabelled_lld final : public pblas_gemm {
 public:
  mislabelled_lld() : pblas_gemm("pblas_gemm.mislabelled_lld") {}

 protected:
  void describe(const layout_params& at, int rows, int cols, int lld, int* desc) const override {
    pblas_gemm::describe(at, rows, cols, lld - at.pad, desc);
  }
};

// The memory claim without the largest of PBLAS's work arrays in each p?gemm call (a panel
// buffer, or on one process the k-wide copy of a transposed operand): memory must fail, and
// memory alone.
class forgets_work_array final : public pblas_gemm {
 public:
  forgets_work_array() : pblas_gemm("pblas_gemm.forgets_work_array") {}
  sc::claims cost(const sc::run_case& c, std::span<const int> coords) const override {
    auto out = pblas_gemm::cost(c, coords);
    out.peak = peak(c, coords, true);
    return out;
  }
};

}  // namespace mylab
