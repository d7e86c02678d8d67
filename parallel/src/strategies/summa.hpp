#pragma once
// SUMMA (van de Geijn & Watts) on a pr × pc mesh, pc = p/pr (parameter `pr`, a divisor of p;
// default 1). Mesh axis 0 indexes the mesh row i (its communicator joins a mesh column, pr ranks),
// axis 1 the mesh column j (its communicator joins a mesh row, pc ranks); rank = i·pc + j.
//
// Blocks. X and Y are block-sharded on both axes. The contraction dimension K is split twice, by
// two partitions a case carries: part.K@1 (pc parts) splits X's columns along the mesh columns,
// part.K (pr parts) splits W's K along the mesh rows. Rank (i, j) holds
//   X[M_i, K@1_j]   W[N@1_j, K_i] (out_in) or W[K_i, N@1_j] (in_out)   Y[M_i, N@1_j]
// so every block is what its placements say, with no constraint tying the two K splits together.
//
// Forward. The K panels are the refinement of the two K partitions: the cuts of part.K and of
// part.K@1 together, in order (at most pr + pc − 1 non-empty panels). Panel [lo, hi) lies inside
// one X column block (owner jx = K@1.owner(lo)) and one W block (owner iw = K.owner(lo)). For each
// panel in order: the owner column jx broadcasts X[M_i, lo:hi) along each mesh row (axis 1,
// root jx, m_i·kk elements), the owner row iw broadcasts W's panel (n_j·kk elements) along each
// mesh column (axis 0, root iw), and every rank adds Xp·Wpᵀ (or Xp·Wp) into its Y block.
// Chain: Y's K products are summed in k order, panel after panel into one accumulator, so the
// chain behind an element is at most kk_t − 1 additions inside panel t, one into the accumulator
// and one per later panel: kk_t + (T − t) ≤ Σ kk = K. The chain is K, as for the reference.
// Overlap: panel t + 1's two broadcasts are started before panel t's product whenever panel t's
// have finished on this rank (one started call per comm), else right after it; a rank waits
// before a product only for the parts it receives, so a root multiplies while its broadcast goes
// (the product runs in quarters of its rows, with the pending broadcasts tested between them).
// A panel that is the root's whole block along K (or that travels along a one-rank axis) is sent
// and read where it lies; any other goes through a panel buffer.
// Peak: Y (m_i·n_j) plus the panel buffers, each sized for the widest panel: for X (m_i·kmax)
// and for W (n_j·kmax) two when two or more of the rank's panels need one, one when one does.
//
// Backward, the operand-stationary SUMMA variants (the panel broadcasts of each variant issued as
// one all-gather, the panel reductions as one reduce-scatter), because dX = dY·W and dW = dYᵀ·X
// contract over dimensions that the forward blocks split on the "wrong" axis:
//   dX (W stationary): all-gather dY[:, N@1_j] along the mesh column (axis 0, counts M_i'·n_j),
//     Q = dY[:, N@1_j]·W_ij (M×k_i, a partial sum over j), reduce-scatter Q's rows along the mesh
//     row (axis 1) by part.M@1: rank (i, j) holds dX[M@1_j, K_i]. Chain N@1.max + depth(pc).
//   dW (X stationary): all-gather dY[M_i, :] along the mesh row (axis 1, counts m_i·n_j', packed
//     block after block), R = dY[M_i, :]ᵀ·X_ij (N×k@1_j, a partial sum over i), reduce-scatter R's
//     rows along the mesh column (axis 0) by part.N: rank (i, j) holds dW[N_i, K@1_j], stored
//     transposed (K@1_j × N_i) in in_out. Chain M.max + depth(pr).
//
//   axis 0 / axis 1   X: S(0) S(1)   Y, dY: S(0) S(1)   dX: S(1) S(0)
//   W, out_in: S(1) S(0)   in_out: S(0) S(1)   dW, out_in: S(0) S(1)   in_out: S(1) S(0)
//   partitions: M, K@1 (X); K, N@1 (W); M@1 (dX rows); N (dW's N)
//   forward:  per panel, broadcast X panel (axis 1, root jx) then W panel (axis 0, root iw)
//   backward: all-gather (axis 0), reduce-scatter (axis 1), all-gather (axis 1),
//             reduce-scatter (axis 0)
//
// bf16 / f16 (acc=f32 reduce=f32 only): the panels are broadcast in the storage dtype and widened
// to f32 for each product, Y is summed in f32 across the panels and rounded once; Q and R are f32
// and reduce-scattered in f32 (4-byte ledger entries), then rounded.
//
// Example: p = 4, pr = 2, K = 5, part.K = 3,2, part.K@1 = 1,4: the panels are [0,1) (jx 0, iw 0),
// [1,3) (jx 1, iw 0) and [3,5) (jx 1, iw 1); three pairs of broadcasts in forward.
#include <cstdint>

#include "shardcheck/parallel/kernel.hpp"

namespace shardcheck::par {

class summa : public kernel {
 public:
  summa();
  [[nodiscard]] const kernel_info& info() const override { return info_; }
  [[nodiscard]] std::vector<int> mesh_dims(const run_case& c) const override;
  [[nodiscard]] layout placement(tensor_slot t, const run_case& c) const override;
  [[nodiscard]] claims cost(const run_case& c, std::span<const int> coords) const override;
  void forward(context& ctx, const run_case& c, const forward_io& io) const override;
  void backward(context& ctx, const run_case& c, const backward_io& io) const override;

 private:
  kernel_info info_;
};

// The end of the K panel starting at lo: the nearer of the two partitions' next cuts.
[[nodiscard]] std::int64_t summa_panel_end(const partition& k_rows, const partition& k_cols,
                                           std::int64_t lo);

}  // namespace shardcheck::par
