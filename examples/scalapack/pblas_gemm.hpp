// ScaLAPACK's PDGEMM and PSGEMM as a kernel of one's own project, gated by shardcheck: every tensor
// block-cyclic on a pr × pc grid, BC(0,nb=mb,src=rsrc),BC(1,nb=nb,src=csrc), the layout any
// ScaLAPACK user's matrices have. shardcheck generates each rank's tiles packed in order (its local
// matrix is ScaLAPACK's local array, row-major); the adapter copies them into column-major local
// arrays of leading dimension lld = max(1, the largest grid row's share) + pad, describes them with
// descinit and calls the PBLAS routine; Y, dX, dW come back the same way. Example (out_in, f64):
//   forward   Y  = X·Wᵀ   p?gemm('N','T', M, N, K, X, W → Y)     in_out: ('N','N', X, W)
//   backward  dX = dY·W   p?gemm('N','N', M, K, N, dY, W → dX)   in_out: ('N','T', dY, W)
//             dW = dYᵀ·X  p?gemm('T','N', N, K, M, dY, X → dW)   in_out: Xᵀ·dY ('T','N', X, dY)
//
// The BLACS grid comes from the mesh: Csys2blacs_handle(the mesh's communicator), then
// Cblacs_gridinit(…, "Row", pr, pc), so process (i, j) is the rank at mesh coordinates (i, j) and
// every MPI call BLACS makes goes over communicators derived from the mesh's, which shardcheck's
// PMPI layer records. The grid is made and released inside each forward and backward.
//
// Parameters (the generators draw them; the replay line carries them): pr the grid's rows (pc =
// p / pr); mb, nb the row and column block sizes (1 … 4096: small values, partial tiles, blocks
// larger than the matrix); rsrc, csrc the grid row and column of the first block, taken modulo pr
// and pc; pad the extra leading dimension (0 … 3), so that a mislabelled lld shows.
//
// Claims.
//   chains: Y K, dX N, dW M. Each element of C is a sum of k products, k = K, N or M. PBLAS picks
//     one of three algorithms by shape (PB_CpgemmAB: panels of A and B broadcast, the local dgemm
//     of each panel added into C in turn; PB_CpgemmAC / PB_CpgemmBC: a local partial product
//     per process, then combined along a grid row or column by BLACS's ?gsum2d); in every one the
//     element is a tree of additions whose leaves are the k products and exact zeros (beta = 0,
//     ranks without a share of k, padding), so no path through it rounds more than k − 1 additions
//     after the product's own rounding: the bound (γ_k + γ_k_ref)·|A||B| with k_par = k holds
//     whichever algorithm runs, whatever the grid, block sizes and combine topology.
//   collectives: not claimed. What PBLAS and BLACS send depends on their algorithm choice and
//     topology; `verify` reports it as not claimed and `explain --record` shows, per rank, what
//     was recorded.
//   memory: each phase's peak on this rank, from the source of Debian 12's ScaLAPACK 2.2.1
//     (PBLAS's pdgemm_.c and PTOOLS, BLACS's SRC), in peak(): the adapter's local arrays (lld ×
//     the largest column share, each), plus the larger of what PDGEMM's work arrays hold at once
//     and the output copied out after it, plus every buffer BLACS is asked for during the phase,
//     plus BLACS's grid bookkeeping (grid_book). Backward: X, W, dY, dX's arrays, then the larger
//     of the dX call's work and (dX copied out, dW's array, the larger of the dW call's work and
//     dW copied out), plus the BLACS buffers of both calls.
//       Which work arrays: choose() replays PDGEMM's cost estimate (the same double arithmetic;
//     a comparison within 1e-9 of a tie claims the largest of all three), then heap_of() counts,
//     for the algorithm it picks, the arrays live at once, each from the size PBLAS asks for:
//     PB_CpgemmAB: WA (C's row share × 32, PB_COutV's width is PILAENV = 32 whatever k), WB
//     (32 × C's column share), the packed panels Abuf, Bbuf (w = min(32, k) × A's M share, B's N
//     share), and, for a transposed operand, the buffer of PB_Cpaxpby's redistribution (one at a
//     time: w × the largest share on either side); when neither operand's K spans two processes,
//     PB_CInV's k-wide copies instead. PB_CpgemmAC (BC): per panel of w = min(32, m) rows (n
//     columns) of C, Abuf (Bbuf), WA (WB, PB_CInV) and a redistribution buffer, then WC (w × B's
//     N share, A's M share) with Cbuf (w × C's share) and the buffer of WC's redistribution into
//     C. On a 1 × 1 grid every panel is contiguous (no Abuf, Bbuf, Cbuf), and a panel that is not
//     redistributed is used in place when its other dimension lies on one process (XisR).
//       BLACS's buffers: BLACS keeps one ready buffer from call to call and, with MpiBuffGood
//     (Bconfig.h), packs each point-to-point send (?gesd2d) into a buffer it keeps on its active
//     queue until a later BLACS call finds the MPI_Isend complete; broadcasts send from the
//     array (no buffer), and each ?gsum2d asks for one (MPI_Reduce's result; twice that when the
//     array is not contiguous). How many sends are still active depends on MPI's progress and on
//     when the receivers post their receives, so the claim counts every buffer the phase asks
//     BLACS for as live: each carries a 56 + 8·(processes of MPI_COMM_WORLD) byte header
//     (BI_GetBuff), the sends carry each element of this rank's share of a redistributed or
//     forwarded operand once (at most max(P, Q) messages per PB_CInV / PB_Cpaxpby call), AC's and
//     BC's ?gsum2d carry WC once per panel (when the direction summed over has two processes or
//     more), and PB_CpaxpbyDN's ?gsum2d of a destination on one process twice its size.
//     Buffers from before the phase that BLACS frees during it only lower the peak.
//       What is counted where: BLACS's datatypes (MPI_Type_vector, MPI_Type_commit/_free),
//     MPI_Testall and the communicators of Cblacs_gridinit are MPI's (the PMPI layer marks them);
//     MPI_Reduce's and MPI_Bcast's own buffers too. Example: M = 3, N = 1, K = 2, f64, in_out on a
//     1 × 2 grid (nb = 1): forward PB_CpgemmAB, WA 3 × 32 and WB 32 × 1 doubles, two 1-element
//     sends. Counting every BLACS request as live, with a header for each of up to max(P, Q)
//     messages per call, is what makes the claim loose on small cases on wide grids (the measured
//     ratios are in docs/gating-a-kernel.md).
#pragma once
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <shardcheck/parallel/kernel.hpp>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

extern "C" {
int Csys2blacs_handle(MPI_Comm comm);
void Cfree_blacs_system_handle(int handle);
void Cblacs_gridinit(int* context, const char* order, int nprow, int npcol);
void Cblacs_gridinfo(int context, int* nprow, int* npcol, int* myrow, int* mycol);
void Cblacs_gridexit(int context);
int numroc_(const int* n, const int* nb, const int* iproc, const int* isrcproc, const int* nprocs);
void descinit_(int* desc, const int* m, const int* n, const int* mb, const int* nb,
               const int* irsrc, const int* icsrc, const int* ictxt, const int* lld, int* info);
void pdgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k,
             const double* alpha, const double* a, const int* ia, const int* ja, const int* desca,
             const double* b, const int* ib, const int* jb, const int* descb, const double* beta,
             double* c, const int* ic, const int* jc, const int* descc);
void psgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k,
             const float* alpha, const float* a, const int* ia, const int* ja, const int* desca,
             const float* b, const int* ib, const int* jb, const int* descb, const float* beta,
             float* c, const int* ic, const int* jc, const int* descc);
}

namespace mylab {
namespace sc = shardcheck::par;

// ScaLAPACK takes int sizes: a larger one is a bad case, not a silent wrap.
[[nodiscard]] inline int to_int(std::int64_t v, const char* what) {
  if (v < 0 || v > std::numeric_limits<int>::max())
    throw shardcheck::invalid_problem(std::string("pblas_gemm: ") + what + " = " +
                                      std::to_string(v) + " does not fit ScaLAPACK's int");
  return static_cast<int>(v);
}

// One distributed matrix as ScaLAPACK holds it on this rank: rows × cols globally, the local
// part column-major with leading dimension lld (≥ the local rows), and its descriptor.
template <class T>
struct local_array {
  int rows = 0, cols = 0;              // global
  int local_rows = 0, local_cols = 0;  // this rank's (numroc)
  int lld = 1;
  int desc[9] = {};
  std::vector<T> data;
};

// Where the grid and the blocks are: what the adapter tells descinit.
struct layout_params {
  int context = 0, pr = 1, pc = 1, myrow = 0, mycol = 0;
  int mb = 1, nb = 1, rsrc = 0, csrc = 0, pad = 0;
};

class pblas_gemm : public sc::kernel {
 public:
  explicit pblas_gemm(std::string name = "pblas_gemm") {
    info_.name = std::move(name);
    info_.summary =
        "ScaLAPACK's PDGEMM/PSGEMM on a pr×pc BLACS grid, every tensor block-cyclic (mb×nb)";
    info_.params = {{"pr", 1, 1 << 16, 1, "BLACS grid rows (pc = p/pr)", false, true},
                    {"mb", 1, 4096, 64, "row block size (ScaLAPACK's MB)"},
                    {"nb", 1, 4096, 64, "column block size (ScaLAPACK's NB)"},
                    {"rsrc", 0, 3, 0, "grid row of the first row block, modulo pr (RSRC)"},
                    {"csrc", 0, 3, 0, "grid column of the first column block, modulo pc (CSRC)"},
                    {"pad", 0, 3, 0, "leading dimension beyond the largest local share (LLD)"}};
  }
  const sc::kernel_info& info() const override { return info_; }

  std::vector<int> mesh_dims(const sc::run_case& c) const override {
    const auto pr = static_cast<int>(c.param("pr"));
    return {pr, c.p / pr};
  }

  sc::layout placement(sc::tensor_slot, const sc::run_case& c) const override {
    const auto dims = mesh_dims(c);
    return {sc::placement::BC(0, c.param("mb"), static_cast<int>(c.param("rsrc") % dims[0])),
            sc::placement::BC(1, c.param("nb"), static_cast<int>(c.param("csrc") % dims[1]))};
  }

  sc::claims cost(const sc::run_case& c, std::span<const int> coords) const override {
    sc::claims out;
    out.chains = std::vector<sc::chain_lengths>{{c.prob.K, c.prob.N, c.prob.M}};
    out.peak = peak(c, coords, false);
    return out;
  }

  // The heap one p?gemm call takes on this rank, from PBLAS's and BLACS's source (see the header):
  // work, the most PBLAS's work arrays hold at once; largest, the largest of those arrays; blacs,
  // every buffer BLACS is asked for during the call (payload and header), any of which may still
  // be live when the call returns.
  struct gemm_heap {
    std::int64_t work = 0, largest = 0, blacs = 0;
  };

  // One dimension's distribution on this rank: blocks of `block` over `procs` coordinates from
  // `src`, this rank at `me`.
  struct axis {
    int block = 1, me = 0, src = 0, procs = 1;
  };
  [[nodiscard]] static std::int64_t share(std::int64_t n, const axis& a, int at) {
    const int nn = static_cast<int>(n);
    return numroc_(&nn, &a.block, &at, &a.src, &a.procs);
  }
  [[nodiscard]] static std::int64_t mine(std::int64_t n, const axis& a) {
    return share(n, a, a.me);
  }
  // The largest share of any coordinate: the first block's.
  [[nodiscard]] static std::int64_t most(std::int64_t n, const axis& a) {
    return share(n, a, a.src);
  }

  // PDGEMM's choice (pdgemm_.c): its communication estimates, computed as it computes them.
  enum class algorithm { ab, ac, bc, unsure };
  [[nodiscard]] static algorithm choose(bool nota, bool notb, std::int64_t m, std::int64_t n,
                                        std::int64_t k, int mb, int nb, int P, int Q) {
    const auto dnroc = [](std::int64_t len, int b, int procs) {
      return static_cast<double>((((len + b - 1) / b) + procs - 1) / procs) *
             static_cast<double>(b);
    };
    const double r = 1.3;  // CBRATIO
    const bool q1 = Q == 1, p1 = P == 1;
    double ab = static_cast<double>(k), ac = static_cast<double>(m), bc = static_cast<double>(n);
    if (!nota && !notb) return algorithm::unsure;  // never called with both transposed
    if (notb && nota) {
      double t1 = dnroc(m, mb, P), t2 = dnroc(n, nb, Q);
      ab *= (q1 ? 0.0 : t1) + (p1 ? 0.0 : t2);
      t1 = dnroc(k, mb, P), t2 = dnroc(n, nb, Q);
      const double t3 = dnroc(k, nb, Q);
      ac *= (q1 ? 0.0 : t1) + std::max(t1, t3) + r * (p1 ? 0.0 : t2);
      t1 = dnroc(m, mb, P), t2 = dnroc(k, nb, Q);
      const double t4 = dnroc(k, mb, P);
      bc *= r * (q1 ? 0.0 : t1) + (p1 ? 0.0 : t2) + std::max(t2, t4);
    } else if (notb) {
      double t1 = dnroc(m, mb, P), t2 = dnroc(n, nb, Q);
      const double t3 = dnroc(m, nb, Q);
      ab *= (q1 ? 0.0 : t1) + std::max(t1, t3) + (p1 ? 0.0 : t2);
      t1 = dnroc(k, mb, P), t2 = dnroc(n, nb, Q);
      ac *= (q1 ? 0.0 : t1) + r * (p1 ? 0.0 : t2);
      t1 = dnroc(k, mb, P), t2 = dnroc(m, nb, Q);
      const double t4 = dnroc(m, mb, P);
      bc *= (q1 ? 0.0 : t1) + r * (p1 ? 0.0 : t2) + std::max(t2, t4);
    } else {
      double t1 = dnroc(m, mb, P), t2 = dnroc(n, nb, Q);
      double t4 = dnroc(n, mb, P);
      ab *= (q1 ? 0.0 : t1) + (p1 ? 0.0 : t2) + std::max(t2, t4);
      t1 = dnroc(n, mb, P), t2 = dnroc(k, nb, Q);
      const double t3 = dnroc(n, nb, Q);
      ac *= r * (q1 ? 0.0 : t1) + std::max(t1, t3) + (p1 ? 0.0 : t2);
      t1 = dnroc(m, mb, P), t2 = dnroc(k, nb, Q);
      bc *= r * (q1 ? 0.0 : t1) + (p1 ? 0.0 : t2);
    }
    // A comparison this close could round the other way in PBLAS's build: claim for all three.
    const auto near = [](double a, double b) {
      return std::abs(a - b) <= 1e-9 * std::max(std::abs(a), std::abs(b));
    };
    if (near(ab, r * bc) || near(ab, r * ac) || near(bc, ac) || near(r * bc, ab))
      return algorithm::unsure;
    if (ab <= r * bc && ab <= r * ac) return algorithm::ab;
    if (bc <= ac && r * bc <= ab) return algorithm::bc;
    return algorithm::ac;
  }

  // p?gemm(ta, tb, m, n, k) with `alg` on operands described like the adapter's (every one
  // mb × nb blocks from (rsrc, csrc), ia = ja = 1) on a P × Q grid, at (rows.me, cols.me); e bytes
  // an element, header the bytes BLACS puts before each buffer's payload. Sizes in elements
  // until the end.
  [[nodiscard]] static gemm_heap heap_of(algorithm alg, bool nota, bool notb, std::int64_t m,
                                         std::int64_t n, std::int64_t k, const axis& rows,
                                         const axis& cols, std::int64_t e, std::int64_t header) {
    gemm_heap h;
    if (m == 0 || n == 0 || k == 0) return h;  // quick return, or PB_Cplapad (no work array)
    const std::int64_t P = rows.procs, Q = cols.procs;
    const std::int64_t W = 32;  // PILAENV: PBLAS's panel width
    // The axis of each operand's dimension: A's M and K, B's K and N (C's are rows and cols).
    const axis &aM = nota ? rows : cols, &aK = nota ? cols : rows;
    const axis &bK = notb ? rows : cols, &bN = notb ? cols : rows;
    const std::int64_t Am = mine(m, aM), Ak = mine(k, aK), Bk = mine(k, bK), Bn = mine(n, bN);
    const std::int64_t Cm = mine(m, rows), Cn = mine(n, cols);
    const bool one = P == 1 && Q == 1;
    // A redistribution (PB_Cpaxpby) of a w-wide panel between orthogonal directions, `from` →
    // `to` of length len: PBLAS's own buffer (one at a time, freed before the next) holds at most
    // w × the largest share of either side.
    // Both on one process (a 1 × 1 grid: PB_CpaxpbyNN, the source replicated) it adds in place.
    const auto internal = [](std::int64_t w, std::int64_t len, const axis& from, const axis& to) {
      if (from.procs == 1 && to.procs == 1) return std::int64_t{0};
      return w * std::max(most(len, from), most(len, to));
    };
    // When the destination lies on one process and the source does not (PB_CpaxpbyDN), each call
    // ends with a ?gsum2d of the destination, w × len: BLACS asks for twice that when it is not
    // contiguous. Over the calls the widths add up to `total`.
    const auto dn_gsum = [&](std::int64_t total, std::int64_t len, const axis& from, const axis& to,
                             std::int64_t calls) -> std::int64_t {
      return to.procs == 1 && from.procs > 1 ? 2 * total * len * e + calls * header : 0;
    };
    // Point-to-point sends: each element of this rank's share of a redistributed operand is sent
    // at most once, in at most max(P, Q) messages a call; BLACS packs each into its own buffer.
    const std::int64_t per_call = std::max(P, Q) * header;
    switch (alg) {
      case algorithm::ab: {
        // A's k-panels go to WA (down C's rows, PB_COutV), B's to WB (along C's columns); a
        // transposed operand's panel lies across and is redistributed (PB_CInV2 → PB_Cpaxpby).
        const bool span_a = aK.procs > 1 && k > aK.block, span_b = bK.procs > 1 && k > bK.block;
        const std::int64_t w = span_a || span_b ? std::min(W, k) : k;  // else one k-wide PB_CInV
        const std::int64_t ia = nota ? 0 : internal(w, m, aM, rows);
        const std::int64_t ib = notb ? 0 : internal(w, n, bN, cols);
        // PB_CInV2 calls on each side: each ends a k-step of w or empties a virtual process.
        const std::int64_t calls = span_a || span_b ? std::min(k, (k + w - 1) / w + P * Q) : 1;
        if (span_a || span_b) {  // WA, WB (PB_COutV: 32 wide whatever k), Abuf, Bbuf
          h.work = W * (Cm + Cn) + w * (Am + Bn) + std::max(ia, ib);
          h.largest = std::max({W * std::max(Cm, Cn), w * std::max(Am, Bn), ia, ib});
        } else {
          // PB_CInV makes WA (Cm × k), redistributes into it, then WB (k × Cn). An operand
          // that is not transposed is used in place when its K lies on one grid column (row)
          // of one process (replicated, XisR); on more, the processes beside it receive a copy.
          const std::int64_t wa = !nota || Q > 1 ? Cm * k : 0, wb = !notb || P > 1 ? Cn * k : 0;
          h.work = std::max(wa + ia, wa + wb + ib);
          h.largest = std::max({wa, wb, ia, ib});
        }
        // An operand in place is broadcast (no buffer: BLACS sends from it) or, when C's
        // panel lies on one grid column (row), sent to it (a packed buffer): only when its K is
        // dealt over Q > 1 (P > 1) processes. A transposed one is sent unless the grid is 1 × 1.
        const bool sends_a = nota ? Q > 1 : P * Q > 1, sends_b = notb ? P > 1 : P * Q > 1;
        h.blacs = ((sends_a ? Am * Ak : 0) + (sends_b ? Bk * Bn : 0)) * e +
                  (sends_a ? calls * per_call : 0) + (sends_b ? calls * per_call : 0);
        if (!nota) h.blacs += dn_gsum(k, m, aM, rows, calls);
        if (!notb) h.blacs += dn_gsum(k, n, bN, cols, calls);
        break;
      }
      case algorithm::ac: {
        // Panels of mbb ≤ 32 rows of C, per virtual process: A's panel (Abuf, w × A's K share)
        // replicated over B's K (WA, PB_CInV), the local product WC (w × B's N share, PB_COutV)
        // summed over the grid column by ?gsum2d, then added into C (Cbuf, w × C's N share).
        // A's panel crosses when neither operand is transposed; WC crosses when B is.
        const std::int64_t w = std::min(W, m);
        const bool cross_a = nota && notb, cross_c = !notb;
        const std::int64_t ia = cross_a ? internal(w, k, aK, bK) : 0;
        const std::int64_t ic = cross_c ? internal(w, n, bN, cols) : 0;
        // On a 1 × 1 grid every panel is contiguous (one virtual process): no Abuf, no Cbuf. A
        // panel that is not redistributed is used in place when its M lies on one grid row
        // (column, A transposed) of processes (PB_CInV's XisR).
        const std::int64_t abuf = one ? 0 : w * Ak, cbuf = one ? 0 : w * Cn;
        const std::int64_t wa = !cross_a && (nota ? P : Q) == 1 ? 0 : w * Bk;
        h.work = std::max(abuf + wa + std::max(ia, w * Bn), w * Bn + cbuf + ic);
        h.largest = std::max({abuf, wa, w * Bn, cbuf, ia, ic});
        const std::int64_t panels = std::min(m, (m + W - 1) / W + P * Q);
        // The ?gsum2d of WC (contiguous: one buffer of w × Bn a panel), when the grid column
        // (row, B transposed) it sums over has more than one process (PB_COutV's YASUM).
        if (notb ? P > 1 : Q > 1) h.blacs = m * Bn * e + panels * header;
        // WC is summed into grid column 0; from there a transposed B's panel is sent across.
        const bool sends_c = cross_c && (Q == 1 || cols.me == 0);
        if (P * Q > 1) h.blacs += (Am * Ak + (sends_c ? m * Bn : 0)) * e + 2 * panels * per_call;
        if (cross_a) h.blacs += dn_gsum(m, k, aK, bK, panels);
        if (cross_c) h.blacs += dn_gsum(m, n, bN, cols, panels);
        break;
      }
      case algorithm::bc: {
        // Panels of nbb ≤ 32 columns of C: B's panel (Bbuf, w × B's K share) replicated over A's
        // K (WB), the local product WC (w × A's M share) summed over the grid row by ?gsum2d,
        // then added into C (Cbuf, w × C's M share). B's panel crosses when neither operand is
        // transposed; WC crosses when A is.
        const std::int64_t w = std::min(W, n);
        const bool cross_b = nota && notb, cross_c = !nota;
        const std::int64_t ib = cross_b ? internal(w, k, bK, aK) : 0;
        const std::int64_t ic = cross_c ? internal(w, m, aM, rows) : 0;
        const std::int64_t bbuf = one ? 0 : w * Bk, cbuf = one ? 0 : w * Cm;  // as in AC
        const std::int64_t wb = !cross_b && (notb ? Q : P) == 1 ? 0 : w * Ak;
        h.work = std::max(bbuf + wb + std::max(ib, w * Am), w * Am + cbuf + ic);
        h.largest = std::max({bbuf, wb, w * Am, cbuf, ib, ic});
        const std::int64_t panels = std::min(n, (n + W - 1) / W + P * Q);
        if (nota ? Q > 1 : P > 1) h.blacs = n * Am * e + panels * header;
        const bool sends_c = cross_c && (P == 1 || rows.me == 0);
        if (P * Q > 1) h.blacs += (Bk * Bn + (sends_c ? n * Am : 0)) * e + 2 * panels * per_call;
        if (cross_b) h.blacs += dn_gsum(n, k, bK, aK, panels);
        if (cross_c) h.blacs += dn_gsum(n, m, aM, rows, panels);
        break;
      }
      case algorithm::unsure:
        for (const auto a : {algorithm::ab, algorithm::ac, algorithm::bc}) {
          const auto g = heap_of(a, nota, notb, m, n, k, rows, cols, e, header);
          h.work = std::max(h.work, g.work);
          h.largest = std::max(h.largest, g.largest);
          h.blacs = std::max(h.blacs, g.blacs);
        }
        return h;
    }
    h.work *= e;
    h.largest *= e;
    return h;
  }

  [[nodiscard]] static gemm_heap pgemm_heap(char ta, char tb, std::int64_t m, std::int64_t n,
                                            std::int64_t k, const axis& rows, const axis& cols,
                                            std::int64_t e, std::int64_t header) {
    const bool nota = ta == 'N', notb = tb == 'N';
    return heap_of(choose(nota, notb, m, n, k, rows.block, cols.block, rows.procs, cols.procs),
                   nota, notb, m, n, k, rows, cols, e, header);
  }

  // The heap of each phase on the rank at grid coordinates `coords` (see the header). With
  // leave_out_largest, the largest PBLAS work array of each call is left out (a broken claim).
  [[nodiscard]] sc::claims::peak_claim peak(const sc::run_case& c, std::span<const int> coords,
                                            bool leave_out_largest) const {
    const auto& p = c.prob;
    const bool out_in = p.layout == shardcheck::weight_layout::out_in;
    const std::int64_t e = p.type == shardcheck::dtype::f32 ? 4 : 8;
    const auto dims = mesh_dims(c);
    const axis rows{to_int(c.param("mb"), "mb"), coords[0],
                    static_cast<int>(c.param("rsrc") % dims[0]), dims[0]};
    const axis cols{to_int(c.param("nb"), "nb"), coords[1],
                    static_cast<int>(c.param("csrc") % dims[1]), dims[1]};
    // BLACS's processes are MPI_COMM_WORLD's (BI_Np): its buffers carry a request per process.
    int world = c.p, up = 0;
    MPI_Initialized(&up);
    if (up != 0) MPI_Comm_size(MPI_COMM_WORLD, &world);
    const std::int64_t np = std::max(world, c.p);
    const std::int64_t header = blacs_buffer_header + 8 * np;
    // A local array as empty_local sizes it, and an output copied out (numroc's share).
    const auto array = [&](std::int64_t r, std::int64_t cl) {
      const std::int64_t ld = std::max<std::int64_t>(1, most(r, rows)) + c.param("pad");
      return ld * std::max<std::int64_t>(1, most(cl, cols)) * e;
    };
    const auto output = [&](std::int64_t r, std::int64_t cl) {
      return mine(r, rows) * mine(cl, cols) * e;
    };
    const auto call = [&](char ta, char tb, std::int64_t m, std::int64_t n, std::int64_t k) {
      auto h = pgemm_heap(ta, tb, m, n, k, rows, cols, e, header);
      if (leave_out_largest) h.work -= h.largest;
      return h;
    };
    const std::int64_t grid = grid_book(dims[0] * dims[1], np);
    const std::int64_t wr = out_in ? p.N : p.K, wc = out_in ? p.K : p.N;
    // Forward: X, W, Y's local arrays, then PDGEMM, then Y copied out.
    const auto f = call('N', out_in ? 'T' : 'N', p.M, p.N, p.K);
    const std::int64_t fwd = grid + array(p.M, p.K) + array(wr, wc) + array(p.M, p.N) +
                             std::max(f.work, output(p.M, p.N)) + f.blacs;
    // Backward: X, W, dY, dX's local arrays; dX's PDGEMM; dX copied out and dW's local array;
    // dW's PDGEMM; dW copied out. BLACS's buffers of the first call may outlive it.
    const auto b1 = call('N', out_in ? 'N' : 'T', p.M, p.K, p.N);
    const auto b2 = out_in ? call('T', 'N', p.N, p.K, p.M) : call('T', 'N', p.K, p.N, p.M);
    const std::int64_t bwd =
        grid + array(p.M, p.K) + array(wr, wc) + array(p.M, p.N) + array(p.M, p.K) +
        std::max(b1.work, output(p.M, p.K) + array(wr, wc) + std::max(b2.work, output(wr, wc))) +
        b1.blacs + b2.blacs;
    return {fwd, bwd};
  }

  // BLACS's bookkeeping (blacs_grid_.c, blacs_map_.c, sys2blacs_.c of the same version), none of
  // it sized by the matrices: a grid's context, sizeof(BLACSCONTEXT) = 160 bytes (four scopes of
  // a communicator and five ints, six ints, a pointer), kept for the phase; while
  // Cblacs_gridinit runs, its map (4 bytes a process), blacs_gridmap's copy of it (4 ×
  // max(processes, 2)) and the MPI ranks it hands MPI_Group_incl (4 a process, freed before the
  // context is made). A process's first grid also makes what BLACS keeps until MPI_Finalize:
  // a request (8 bytes) and an MPI_Status (24) per process of MPI_COMM_WORLD, the context table
  // (MAXNCTXT = 10 pointers), the system-handle table (MAXNSYSCTXT + 1 = 11 MPI_Comms) and
  // BI_COMM_WORLD's int; claimed in every phase, as a phase cannot tell whether it is the first.
  [[nodiscard]] static std::int64_t grid_book(std::int64_t processes, std::int64_t world) {
    const std::int64_t context = 160, first = 32 * world + 80 + 88 + 4;
    return context + 4 * processes + 4 * std::max<std::int64_t>(processes, 2) + 4 * processes +
           first;
  }
  // BLACS's buffer header (BI_GetBuff): sizeof(BLACBUFF) = 56 bytes, then an MPI_Request per
  // process of MPI_COMM_WORLD (added above), aligned to BUFFALIGN = 8 (already).
  static constexpr std::int64_t blacs_buffer_header = 56;

  void forward(sc::context& ctx, const sc::run_case& c, const sc::forward_io& io) const override {
    io.visit([&]<class T>(const sc::matrix<T>& x, sc::weights<T> w, sc::matrix<T>& y) {
      const grid g(ctx, c, *this);
      const auto& p = c.prob;
      const bool out_in = p.layout == shardcheck::weight_layout::out_in;
      const auto a = to_local(g.at, x, p.M, p.K);
      const auto b = out_in ? to_local(g.at, w[0], p.N, p.K) : to_local(g.at, w[0], p.K, p.N);
      auto out = empty_local<T>(g.at, p.M, p.N);
      gemm('N', out_in ? 'T' : 'N', p.K, a, b, out);
      y = from_local(out);
    });
  }

  void backward(sc::context& ctx, const sc::run_case& c, const sc::backward_io& io) const override {
    io.visit([&]<class T>(const sc::matrix<T>& x, sc::weights<T> w, const sc::matrix<T>& dy,
                          sc::matrix<T>& dx, sc::gradients<T> dws) {
      const grid g(ctx, c, *this);
      const auto& p = c.prob;
      const bool out_in = p.layout == shardcheck::weight_layout::out_in;
      const auto xa = to_local(g.at, x, p.M, p.K);
      const auto wa = out_in ? to_local(g.at, w[0], p.N, p.K) : to_local(g.at, w[0], p.K, p.N);
      const auto dya = to_local(g.at, dy, p.M, p.N);
      auto dxa = empty_local<T>(g.at, p.M, p.K);
      gemm('N', out_in ? 'N' : 'T', p.N, dya, wa, dxa);
      dx = from_local(dxa);
      auto dwa = out_in ? empty_local<T>(g.at, p.N, p.K) : empty_local<T>(g.at, p.K, p.N);
      if (out_in)
        gemm('T', 'N', p.M, dya, xa, dwa);
      else
        gemm('T', 'N', p.M, xa, dya, dwa);
      dws[0] = from_local(dwa);
    });
  }

 protected:
  // The descriptor of a local array: descinit with the case's block sizes and sources. A broken
  // variant (broken_variants.hpp) overrides it.
  virtual void describe(const layout_params& at, int rows, int cols, int lld, int* desc) const {
    int info = 0;
    descinit_(desc, &rows, &cols, &at.mb, &at.nb, &at.rsrc, &at.csrc, &at.context, &lld, &info);
    if (info != 0) throw std::runtime_error("descinit_: info " + std::to_string(info));
  }

 private:
  // The BLACS grid of one forward or backward, from the mesh's communicator; released at the end.
  class grid {
   public:
    grid(sc::context& ctx, const sc::run_case& c, const pblas_gemm& k) {
      const auto dims = k.mesh_dims(c);
      at.pr = dims[0];
      at.pc = dims[1];
      at.mb = to_int(c.param("mb"), "mb");
      at.nb = to_int(c.param("nb"), "nb");
      at.rsrc = static_cast<int>(c.param("rsrc") % at.pr);
      at.csrc = static_cast<int>(c.param("csrc") % at.pc);
      at.pad = static_cast<int>(c.param("pad"));
      handle_ = Csys2blacs_handle(ctx.grid.all().native_handle());
      at.context = handle_;
      Cblacs_gridinit(&at.context, "Row", at.pr, at.pc);
      int nprow = 0, npcol = 0;
      Cblacs_gridinfo(at.context, &nprow, &npcol, &at.myrow, &at.mycol);
      const auto coords = ctx.grid.coords();
      if (nprow != at.pr || npcol != at.pc || at.myrow != coords[0] || at.mycol != coords[1])
        throw std::runtime_error("BLACS grid " + std::to_string(nprow) + "×" +
                                 std::to_string(npcol) + " puts this rank at (" +
                                 std::to_string(at.myrow) + ", " + std::to_string(at.mycol) +
                                 "), not at its mesh coordinates");
    }
    ~grid() {
      Cblacs_gridexit(at.context);
      Cfree_blacs_system_handle(handle_);
    }
    grid(const grid&) = delete;
    grid& operator=(const grid&) = delete;
    layout_params at;

   private:
    int handle_ = 0;
  };

  // An empty (zero) distributed rows × cols matrix on this rank.
  template <class T>
  local_array<T> empty_local(const layout_params& at, std::int64_t rows, std::int64_t cols) const {
    local_array<T> out;
    out.rows = to_int(rows, "rows");
    out.cols = to_int(cols, "cols");
    out.local_rows = numroc_(&out.rows, &at.mb, &at.myrow, &at.rsrc, &at.pr);
    out.local_cols = numroc_(&out.cols, &at.nb, &at.mycol, &at.csrc, &at.pc);
    // Sized for the largest share of any grid row (column), the one holding the first block,
    // as ScaLAPACK programs often do: lld ≥ the local rows, and room for any source's share.
    const int most_rows = numroc_(&out.rows, &at.mb, &at.rsrc, &at.rsrc, &at.pr);
    const int most_cols = numroc_(&out.cols, &at.nb, &at.csrc, &at.csrc, &at.pc);
    out.lld = std::max(1, most_rows) + at.pad;
    const auto ld = static_cast<std::size_t>(out.lld);
    const auto columns = static_cast<std::size_t>(std::max(1, most_cols));
    if (ld > std::numeric_limits<std::size_t>::max() / sizeof(T) / columns)
      throw shardcheck::invalid_problem("pblas_gemm: a local array of " + std::to_string(ld) + "×" +
                                        std::to_string(columns) + " elements is too large");
    const std::size_t size = ld * columns;
    out.data.assign(size, T{0});
    describe(at, out.rows, out.cols, out.lld, out.desc);
    return out;
  }

  // This rank's tiles (shardcheck's local matrix, row-major) as ScaLAPACK's local array: local
  // (i, j) at data[j·lld + i]. Its shape must be numroc's: shardcheck's tile map and ScaLAPACK's
  // agree, or the case is reported as a runs failure.
  template <class T>
  local_array<T> to_local(const layout_params& at, const sc::matrix<T>& m, std::int64_t rows,
                          std::int64_t cols) const {
    local_array<T> out = empty_local<T>(at, rows, cols);
    if (m.rows != static_cast<std::size_t>(out.local_rows) ||
        m.cols != static_cast<std::size_t>(out.local_cols))
      throw std::runtime_error(
          "local matrix " + std::to_string(m.rows) + "×" + std::to_string(m.cols) +
          ", numroc says " + std::to_string(out.local_rows) + "×" + std::to_string(out.local_cols));
    const auto ld = static_cast<std::size_t>(out.lld);
    for (std::size_t i = 0; i < m.rows; ++i)
      for (std::size_t j = 0; j < m.cols; ++j) out.data[j * ld + i] = m.row(i)[j];
    return out;
  }

  template <class T>
  static sc::matrix<T> from_local(const local_array<T>& a) {
    sc::matrix<T> m(static_cast<std::size_t>(a.local_rows), static_cast<std::size_t>(a.local_cols));
    const auto ld = static_cast<std::size_t>(a.lld);
    for (std::size_t i = 0; i < m.rows; ++i)
      for (std::size_t j = 0; j < m.cols; ++j) m.row(i)[j] = a.data[j * ld + i];
    return m;
  }

  // C = op(A)·op(B), C being c.rows × c.cols and k the contraction length.
  template <class T>
  static void gemm(char ta, char tb, std::int64_t k, const local_array<T>& a,
                   const local_array<T>& b, local_array<T>& c) {
    const int one = 1, kk = to_int(k, "k");
    const T alpha = 1, beta = 0;
    if constexpr (std::is_same_v<T, double>)
      pdgemm_(&ta, &tb, &c.rows, &c.cols, &kk, &alpha, a.data.data(), &one, &one, a.desc,
              b.data.data(), &one, &one, b.desc, &beta, c.data.data(), &one, &one, c.desc);
    else
      psgemm_(&ta, &tb, &c.rows, &c.cols, &kk, &alpha, a.data.data(), &one, &one, a.desc,
              b.data.data(), &one, &one, b.desc, &beta, c.data.data(), &one, &one, c.desc);
  }

  sc::kernel_info info_;
};

}  // namespace mylab
