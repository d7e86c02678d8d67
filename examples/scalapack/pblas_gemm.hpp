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
//   memory: not claimed. shardcheck meters PBLAS's and BLACS's mallocs, and outside PDGEMM the
//     peak follows from the case: the adapter's local arrays and copied-out outputs, plus 160
//     bytes for the BLACS grid of the phase (more on a process's first grid, where BLACS sets up
//     arrays it keeps until MPI_Finalize). What PDGEMM allocates inside does not yet: it
//     picks one of three algorithms by a cost estimate (PB_CpgemmAB, _AC, _BC), each with its own
//     work arrays (panels PILAENV = 32 wide, packed copies of panels that are not contiguous in
//     the lcm of the block cycles, PB_Cpaxpby's redistribution buffers for operands not aligned
//     with C), and BLACS packs each point-to-point send into a buffer it keeps until the
//     MPI_Isend completes, so how many are live at once depends on MPI's progress. A bound has
//     to count every one of those requests, and so has to compute each of their sizes from the
//     case as PBLAS does; until it does, none is claimed.
#pragma once
#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <shardcheck/parallel/kernel.hpp>
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

  sc::claims cost(const sc::run_case& c, std::span<const int>) const override {
    sc::claims out;
    out.chains = std::vector<sc::chain_lengths>{{c.prob.K, c.prob.N, c.prob.M}};
    return out;
  }

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
