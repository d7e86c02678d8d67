// PETSc's MATMPIDENSE products as a kernel of one's own project, gated by shardcheck. A MATMPIDENSE
// matrix is split by rows (each rank its rows, every column, column-major); the adapter hands
// PETSc shardcheck's row blocks as they are and takes the products' row blocks back:
//   out_in  Y  = X·Wᵀ   MatMatTransposeMult(X, W)    one MPI_Allgatherv of W's rows
//           dX = dY·W   MatMatMult(dY, W)            column by column: MatMult, dY · W(:, j)
//           dW = dYᵀ·X  MatTransposeMatMult(dY, X)   local dYᵀ·X, then MPI_Reduce_scatter
//   in_out  Y  = X·W    MatMatMult(X, W)
//           dX = dY·Wᵀ  MatMatTransposeMult(dY, W)
//           dW = Xᵀ·dY  MatTransposeMatMult(X, dY)
// Every tensor is S(0) on a 1-axis mesh of p ranks: X, Y, dY, dX by the case's partition of M, W
// and dW by that of their rows (N for out_in, K for in_out); uneven and empty parts are PETSc's
// too. A matrix's column layout (PETSc's "local columns": which entries of a vector it multiplies
// this rank keeps) is that partition of its column dimension when the case has one, PETSc's
// PETSC_DECIDE split otherwise, so that each product's operands agree as PETSc requires. Example,
// out_in on p = 2, M = 3 (part.M=2,1), N = 4 (part.N=1,3), K = 5: rank 0 holds X rows 0–1,
// W row 0; MatMatTransposeMult gathers all 4 rows of W on both ranks and rank 0 computes Y rows
// 0–1 with one local dgemm.
//
// PETSc is initialised once per process by the check program (main.cpp), on the MPI shardcheck
// runs; every matrix lives on the mesh's communicator, so the MPI calls PETSc makes on the
// communicator it derives from it reach shardcheck's ledger.
//
// Claims.
//   chains: Y K, dX N, dW M's largest part + p − 1. Y is one local dgemm over all K (the
//     gathered Wᵀ), dX one local dgemv per column over all N, dW a local dgemm over this rank's
//     rows of M whose partial sums MPI_Reduce_scatter adds in an order MPI chooses (p − 1 at
//     worst). in_out has the same chains: Y a dgemv over all K per column, dX a dgemm over all N
//     (the gathered W), dW as out_in.
//   collectives: every MPI call PETSc 3.18 makes on the mesh's communicator or its duplicate, in
//     order (read from mpidense.c, matproduct.c, pmap.c, matstash.c, mpits.c, sf.c and
//     sfallgatherv.c; petsc_calls below). Each MatCreateDense sets up two PetscLayouts on the
//     communicator it is given (axis −1): an MPI_Allgather of one PetscInt each. Its assembly
//     runs PetscCommBuildTwoSided on PETSc's duplicate (axis 0): an MPI_Allreduce of p ints.
//     A product's C gets two layouts on axis 0, then:
//       MatMatTransposeMult  MPI_Allgatherv of B's rows, then C's assembly;
//       MatTransposeMatMult  MPI_Reduce_scatter of all of Aᵀ·B by C's rows, then the assembly;
//       MatMatMult           for column 0, B's and C's column vectors (a layout each) and A's
//                            PetscSF: MPI_Allreduce of 2 PetscInts (are the shares of A's
//                            columns equal?), if not 1 int (how many ranks have none?) and,
//                            when only one has any, 1 int more (which?); then per column of B
//                            an MPI_Iallgather(v) of it, or MPI_Ibcast from that one rank;
//                            then the assembly.
//     One rank makes MATSEQDENSE matrices: only their layouts call MPI. Example: out_in forward
//     on p = 2 is 2 + 1, 2 + 1 (X, W), 2, the Allgatherv of N·K doubles, 1: 10 calls.
//   memory: each phase's arrays, as PetscMalloc asks for them (n doubles rounded up to 16
//     bytes): the local arrays of X, W, dY and of every product; MatMatTransposeMult's W
//     transposed and W gathered (w·K + N·K out_in), MatTransposeMatMult's local Aᵀ·B and its
//     send buffer (2·N·K), MatMult's gathered column (the length of A's columns), and the outputs
//     the adapter copies out; the per-rank arrays (each layout's p + 1 ranges, each MATMPIDENSE's
//     2p stash flags, the products' counts); plus PETSc's bookkeeping, which no size of the case
//     changes (forward_book … below: object headers, composed-function lists, PetscSF structures),
//     the largest measured, rounded up. Example, out_in on p = 2, M = N = K = 64, rank 0 holding
//     32 rows of each: forward 8·(5·32·64 + 64·64) = 114688 B of arrays (X, W, Y in PETSc, Y
//     copied out, W transposed; all of W), 176 B of per-rank arrays and 31296 B of bookkeeping:
//     146160 B (`explain` prints it).
#pragma once
#include <mpi.h>
#include <petscmat.h>

#include <cstdint>
#include <optional>
#include <shardcheck/parallel/kernel.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace mylab {
namespace sc = shardcheck::par;

// A PETSc error code as an exception naming the call.
inline void petsc_check(PetscErrorCode rc, const char* what) {
  if (rc != 0) throw std::runtime_error(std::string(what) + ": PETSc error " + std::to_string(rc));
}

// A Mat, destroyed with its scope.
class petsc_mat {
 public:
  petsc_mat() = default;
  ~petsc_mat() {
    if (m_ != nullptr) MatDestroy(&m_);
  }
  petsc_mat(petsc_mat&& o) noexcept : m_(std::exchange(o.m_, nullptr)) {}
  petsc_mat& operator=(petsc_mat&&) = delete;
  [[nodiscard]] Mat get() const { return m_; }
  [[nodiscard]] Mat* out() { return &m_; }

 private:
  Mat m_ = nullptr;
};

class petsc_dense : public sc::kernel {
 public:
  explicit petsc_dense(std::string name = "petsc_dense") {
    info_.name = std::move(name);
    info_.summary =
        "PETSc's MATMPIDENSE products: MatMatTransposeMult, MatMatMult, MatTransposeMatMult";
    info_.dtypes = {shardcheck::dtype::f64};  // PetscScalar is double in this PETSc
  }
  const sc::kernel_info& info() const override { return info_; }

  sc::layout placement(sc::tensor_slot, const sc::run_case&) const override {
    return {sc::placement::S(0)};
  }

  // Above 1024 ranks PETSc's assembly finds its senders with MPI_Ibarrier and point-to-point
  // messages (PetscCommBuildTwoSided's IBARRIER), which the ledger below does not state.
  std::optional<std::string> declines(const sc::run_case& c) const override {
    if (c.p > 1024)
      return "p=" + std::to_string(c.p) + ": PETSc builds two-sided with MPI_Ibarrier above 1024";
    return std::nullopt;
  }

  sc::claims cost(const sc::run_case& c, std::span<const int> coords) const override {
    sc::claims out;
    out.collectives = ledger(c, coords[0]);
    out.peak = peak(c, coords[0]);
    const std::int64_t depth = sc::reduction_depth(sc::backend::mpi, sc::collective::reduce_scatter,
                                                   c.p, c.prob.N * c.prob.K);
    out.chains = std::vector<sc::chain_lengths>{
        {c.prob.K, c.prob.N, c.part("M").max_size() + depth, {.dw = depth}}};
    return out;
  }

  // What PETSc 3.18 sends for case c on rank me, call by call (see the header).
  static sc::claims::collective_claim ledger(const sc::run_case& c, int me) {
    const auto& p = c.prob;
    const bool out_in = p.layout == shardcheck::weight_layout::out_in;
    sc::claims::collective_claim out;
    petsc_calls fwd{out.forward, c.p, me}, bwd{out.backward, c.p, me};
    fwd.create();  // X
    fwd.create();  // W
    if (out_in)
      fwd.mat_transpose_mult(c.part("N"), p.K);  // Y = X·Wᵀ gathers W (N × K)
    else
      fwd.mat_mult(columns(c, "K"), p.N);  // Y = X·W, one MatMult per column of W
    bwd.create();                          // X
    bwd.create();                          // W
    bwd.create();                          // dY
    if (out_in) {
      bwd.mat_mult(columns(c, "N"), p.K);        // dX = dY·W
      bwd.transpose_mat_mult(c.part("N"), p.K);  // dW = dYᵀ·X, rows of dW as dY's columns
    } else {
      bwd.mat_transpose_mult(c.part("K"), p.N);      // dX = dY·Wᵀ gathers W (K × N)
      bwd.transpose_mat_mult(columns(c, "K"), p.N);  // dW = Xᵀ·dY, rows of dW as X's columns
    }
    return out;
  }

  // The heap PETSc 3.18 and the adapter hold at most in each phase on rank me (see the header):
  // every array whose size the case sets, as PetscMalloc asks for it, plus PETSc's bookkeeping.
  static sc::claims::peak_claim peak(const sc::run_case& c, int me) {
    const auto& p = c.prob;
    const bool out_in = p.layout == shardcheck::weight_layout::out_in;
    const std::int64_t m = c.part("M").size(me);
    const std::int64_t w = out_in ? c.part("N").size(me) : c.part("K").size(me);  // W's rows here
    const std::int64_t d = sizeof(double);
    // PetscMalloc asks for n doubles rounded up to PETSC_MEMALIGN (16 bytes); none for n = 0.
    const auto array = [](std::int64_t n) {
      return (n * std::int64_t{sizeof(double)} + 15) / 16 * 16;
    };
    // Matrices' local arrays: X, W, dY and the products' C (Y, dX, dW); the outputs the adapter
    // copies them into (operator new, exact).
    const std::int64_t x = array(m * p.K), wa = out_in ? array(w * p.K) : array(w * p.N);
    const std::int64_t y = array(m * p.N), dx = array(m * p.K),
                       dw = out_in ? array(w * p.K) : array(w * p.N);
    std::int64_t fwd = x + wa + y + d * m * p.N;
    std::int64_t bwd = x + wa + y + dx + dw + d * m * p.K + d * w * (out_in ? p.K : p.N);
    if (c.p == 1) return {fwd + seq_forward_book, bwd + seq_backward_book};
    // Work arrays, and the small per-rank arrays: each layout's ranges (p + 1 PetscInts), each
    // MATMPIDENSE's stash flags (2p PetscMPIInts), the products' counts and displacements.
    const auto ints = [](std::int64_t n) {
      return (n * std::int64_t{sizeof(PetscInt)} + 15) / 16 * 16;
    };
    const std::int64_t ranges = ints(c.p + 1), flags = ints(2 * c.p), counts = ints(c.p);
    const std::int64_t matrix = 2 * ranges + flags;
    const std::int64_t nk = array(p.N * p.K);
    // MatMatMult's MatMult path for `columns` columns of B and A's column partition `acols`: the
    // gathered column (lvec, acols' length), B's and C's column vectors (a layout each), and an
    // ALLGATHERV PetscSF's counts and displacements when the shares differ.
    const auto mat_mult = [&](const sc::partition& acols, std::int64_t columns) -> std::int64_t {
      if (columns == 0) return 0;
      bool equal = true;
      for (int r = 0; r < c.p; ++r) equal = equal && acols.size(r) == acols.size(0);
      return array(acols.length()) + 2 * ranges + (equal ? 0 : 2 * counts) + mat_mult_book;
    };
    if (out_in) {
      // MatMatTransposeMult: W's own rows transposed and all of W gathered; counts, displacements.
      fwd += 3 * matrix + array(w * p.K) + nk + counts + ranges;
      // MatMatMult(dY, W); MatTransposeMatMult(dY, X): all of dYᵀ·X, twice (the local product
      // and the reduce-scatter's send buffer), and the receive counts.
      bwd += 5 * matrix + mat_mult(columns(c, "N"), p.K) + 2 * nk + counts;
    } else {
      fwd += 3 * matrix + mat_mult(columns(c, "K"), p.N);
      // MatMatTransposeMult(dY, W) as in out_in's forward; MatTransposeMatMult(X, dY).
      bwd += 5 * matrix + array(w * p.N) + nk + counts + ranges + 2 * nk + counts;
    }
    return {fwd + forward_book, bwd + backward_book};
  }

  void forward(sc::context& ctx, const sc::run_case& c, const sc::forward_io& io) const override {
    io.visit([&]<class T>(const sc::matrix<T>& x, sc::weights<T> w, sc::matrix<T>& y) {
      if constexpr (std::is_same_v<T, double>) {
        const MPI_Comm comm = ctx.grid.all().native_handle();
        const auto& p = c.prob;
        const bool out_in = p.layout == shardcheck::weight_layout::out_in;
        const petsc_mat xm = to_petsc(comm, c, x, "M", "K");
        const petsc_mat wm =
            out_in ? to_petsc(comm, c, w[0], "N", "K") : to_petsc(comm, c, w[0], "K", "N");
        petsc_mat ym;
        if (out_in)
          petsc_check(
              MatMatTransposeMult(xm.get(), wm.get(), MAT_INITIAL_MATRIX, PETSC_DEFAULT, ym.out()),
              "MatMatTransposeMult");
        else
          petsc_check(MatMatMult(xm.get(), wm.get(), MAT_INITIAL_MATRIX, PETSC_DEFAULT, ym.out()),
                      "MatMatMult");
        y = from_petsc(ym.get());
      }
    });
  }

  void backward(sc::context& ctx, const sc::run_case& c, const sc::backward_io& io) const override {
    io.visit([&]<class T>(const sc::matrix<T>& x, sc::weights<T> w, const sc::matrix<T>& dy,
                          sc::matrix<T>& dx, sc::gradients<T> dws) {
      if constexpr (std::is_same_v<T, double>) {
        const MPI_Comm comm = ctx.grid.all().native_handle();
        const bool out_in = c.prob.layout == shardcheck::weight_layout::out_in;
        const petsc_mat xm = to_petsc(comm, c, x, "M", "K");
        const petsc_mat wm =
            out_in ? to_petsc(comm, c, w[0], "N", "K") : to_petsc(comm, c, w[0], "K", "N");
        const petsc_mat dym = to_petsc(comm, c, dy, "M", "N");
        petsc_mat dxm, dwm;
        if (out_in) {
          petsc_check(MatMatMult(dym.get(), wm.get(), MAT_INITIAL_MATRIX, PETSC_DEFAULT, dxm.out()),
                      "MatMatMult");
          petsc_check(MatTransposeMatMult(dym.get(), xm.get(), MAT_INITIAL_MATRIX, PETSC_DEFAULT,
                                          dwm.out()),
                      "MatTransposeMatMult");
        } else {
          petsc_check(MatMatTransposeMult(dym.get(), wm.get(), MAT_INITIAL_MATRIX, PETSC_DEFAULT,
                                          dxm.out()),
                      "MatMatTransposeMult");
          petsc_check(MatTransposeMatMult(xm.get(), dym.get(), MAT_INITIAL_MATRIX, PETSC_DEFAULT,
                                          dwm.out()),
                      "MatTransposeMatMult");
        }
        dx = from_petsc(dxm.get());
        dws[0] = from_petsc(dwm.get());
      }
    });
  }

 private:
  // The MPI calls of PETSc's steps on rank me of p, appended to one phase's ledger. A PetscLayout's
  // set-up gathers every rank's local size (MPI_Allgather of one PetscInt); a MATMPIDENSE's
  // assembly finds who sends it stashed entries (PetscCommBuildTwoSided's MPI_Allreduce of p ints;
  // nobody sends any). One rank makes MATSEQDENSE matrices instead, whose assembly and products
  // are local: only their layouts' set-up calls MPI.
  struct petsc_calls {
    std::vector<sc::ledger_entry>& log;
    int p, me;

    void layout(int axis) const {
      const std::vector<std::int64_t> one_each(static_cast<std::size_t>(p), 1);
      auto e = sc::all_gather_entry(sc::backend::mpi, one_each, me, sizeof(PetscInt));
      e.axis = axis;
      log.push_back(e);
    }
    void allreduce_ints(std::int64_t n) const {
      log.push_back(sc::all_reduce_entry(sc::backend::mpi, n, me, p, sizeof(PetscMPIInt)));
    }
    void assembly() const {
      if (p > 1) allreduce_ints(p);
    }
    // MatCreateDense on the mesh's communicator (axis −1: the layouts keep the communicator they
    // are given) and its assembly (on PETSc's duplicate of it: axis 0).
    void create() const {
      layout(-1);
      layout(-1);
      assembly();
    }
    // A product's C: made on PETSc's communicator, its row and column layouts set up.
    void product() const {
      layout(0);
      layout(0);
    }
    // MatMatTransposeMult(A, B): B's rows (`rows`, each `cols` long) gathered by MPI_Allgatherv.
    void mat_transpose_mult(const sc::partition& rows, std::int64_t cols) const {
      product();
      if (p == 1) return;
      log.push_back(sc::all_gather_entry(sc::backend::mpi, rows.scaled(cols), me, sizeof(double)));
      assembly();
    }
    // MatTransposeMatMult(A, B): the local Aᵀ·B (all of C) summed into C's rows (`rows`, each
    // `cols` long) by MPI_Reduce_scatter.
    void transpose_mat_mult(const sc::partition& rows, std::int64_t cols) const {
      product();
      if (p == 1) return;
      log.push_back(
          sc::reduce_scatter_entry(sc::backend::mpi, rows.scaled(cols), me, sizeof(double)));
      assembly();
    }
    // MatMatMult(A, B) (MatProductNumeric_X_Dense): per column of B a MatMult, whose PetscSF
    // gathers the column by A's column layout `acols`. Column 0 first makes B's and C's column
    // vectors (a layout each), and A's PetscSF: PetscSFSetGraphWithPattern compares the ranks'
    // shares (MPI_Allreduce of 2 PetscInts); unequal shares make it an ALLGATHERV SF, whose set-up
    // counts the ranks without a share (MPI_Allreduce of 1 int) and, when only one rank has any,
    // finds that rank (1 int more) and broadcasts from it instead of gathering.
    void mat_mult(const sc::partition& acols, std::int64_t columns) const {
      product();
      if (p == 1) return;
      if (columns > 0) {
        layout(0);
        layout(0);
        log.push_back(sc::all_reduce_entry(sc::backend::mpi, 2, me, p, sizeof(PetscInt)));
        int holders = 0, root = -1;
        bool equal = true;
        for (int r = 0; r < p; ++r) {
          if (acols.size(r) > 0) ++holders, root = r;
          equal = equal && acols.size(r) == acols.size(0);
        }
        const bool bcast = !equal && holders == 1;
        if (!equal) allreduce_ints(1);
        if (bcast) allreduce_ints(1);
        const std::int64_t n = acols.length();
        for (std::int64_t k = 0; k < columns; ++k)
          log.push_back(
              bcast ? sc::broadcast_entry(sc::backend::mpi, n, root, me, p, sizeof(double))
                    : sc::all_gather_entry(sc::backend::mpi, acols.scaled(1), me, sizeof(double)));
      }
      assembly();
    }
  };

  // PETSc's partition of dimension `dim` as a matrix's columns: the case's where it splits it,
  // PetscSplitOwnership's (balanced) elsewhere.
  static sc::partition columns(const sc::run_case& c, const char* dim) {
    const auto it = c.parts.find(dim);
    return it == c.parts.end() ? sc::partition::balanced(sc::dim_length(c.prob, dim), c.p)
                               : it->second;
  }

  // This rank's share of dimension `dim` where the case splits it, PETSC_DECIDE elsewhere.
  static PetscInt local_size(const sc::run_case& c, const char* dim, int rank) {
    const auto it = c.parts.find(dim);
    return it == c.parts.end() ? PETSC_DECIDE : static_cast<PetscInt>(it->second.size(rank));
  }

  // A rows × cols MATMPIDENSE holding this rank's row block m (row-major) in PETSc's column-major
  // local array.
  static petsc_mat to_petsc(MPI_Comm comm, const sc::run_case& c, const sc::matrix<double>& m,
                            const char* rows, const char* cols) {
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    petsc_mat a;
    petsc_check(MatCreateDense(comm, static_cast<PetscInt>(m.rows), local_size(c, cols, rank),
                               sc::dim_length(c.prob, rows), sc::dim_length(c.prob, cols), nullptr,
                               a.out()),
                "MatCreateDense");
    PetscScalar* data = nullptr;
    PetscInt lda = 0;
    petsc_check(MatDenseGetLDA(a.get(), &lda), "MatDenseGetLDA");
    petsc_check(MatDenseGetArrayWrite(a.get(), &data), "MatDenseGetArrayWrite");
    for (std::size_t i = 0; i < m.rows; ++i)
      for (std::size_t j = 0; j < m.cols; ++j)
        data[j * static_cast<std::size_t>(lda) + i] = m.row(i)[j];
    petsc_check(MatDenseRestoreArrayWrite(a.get(), &data), "MatDenseRestoreArrayWrite");
    petsc_check(MatAssemblyBegin(a.get(), MAT_FINAL_ASSEMBLY), "MatAssemblyBegin");
    petsc_check(MatAssemblyEnd(a.get(), MAT_FINAL_ASSEMBLY), "MatAssemblyEnd");
    return a;
  }

  // This rank's rows of a MATMPIDENSE, row-major.
  static sc::matrix<double> from_petsc(Mat a) {
    PetscInt local_rows = 0, cols = 0, lda = 0;
    petsc_check(MatGetLocalSize(a, &local_rows, nullptr), "MatGetLocalSize");
    petsc_check(MatGetSize(a, nullptr, &cols), "MatGetSize");
    petsc_check(MatDenseGetLDA(a, &lda), "MatDenseGetLDA");
    const PetscScalar* data = nullptr;
    petsc_check(MatDenseGetArrayRead(a, &data), "MatDenseGetArrayRead");
    sc::matrix<double> m(static_cast<std::size_t>(local_rows), static_cast<std::size_t>(cols));
    for (std::size_t i = 0; i < m.rows; ++i)
      for (std::size_t j = 0; j < m.cols; ++j)
        m.row(i)[j] = data[j * static_cast<std::size_t>(lda) + i];
    petsc_check(MatDenseRestoreArrayRead(a, &data), "MatDenseRestoreArrayRead");
    return m;
  }

  // PETSc's bookkeeping, which no size of the case changes: object headers and operation tables,
  // composed-function lists, type names, layouts, stashes, Mat_Product and PetscSF structures.
  // The largest measured over 520 cases at 1–4 ranks (M, N, K 0 … 77, both layouts, uneven and
  // empty parts), each phase's peak less the arrays above, rounded up to 64 bytes: one rank's
  // MATSEQDENSE forward (3 matrices, a product) and backward (5 matrices, 2 products); p > 1,
  // MATMPIDENSE with its inner MATSEQDENSE; the MatMult path of MatMatMult (2 column vectors, a
  // PetscSF, the sequential lvec).
  static constexpr std::int64_t seq_forward_book = 15872, seq_backward_book = 26432;
  static constexpr std::int64_t forward_book = 31296, backward_book = 57344, mat_mult_book = 7808;

  sc::kernel_info info_;
};

}  // namespace mylab
