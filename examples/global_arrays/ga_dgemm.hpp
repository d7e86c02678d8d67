// Global Arrays' GA_Dgemm and GA_Sgemm as a kernel of one's own project, gated by shardcheck
// (Debian's libglobalarrays-dev 5.8.2 for Open MPI, built on ARMCI-MPI 0.3.1: ARMCI over MPI-3
// RMA, every process its own ARMCI node, no progress rank). Each tensor is a 2-D global array
// made with NGA_Create(chunk = {-1, columns}): GA deals the rows (its ddb heuristic), every
// column in one block; the kernel reports that split through library_partitions (ga_rows), so
// shardcheck generates and judges each rank's rows where GA puts them, and checks it at run time
// against NGA_Distribution. Each rank NGA_Puts its rows in, the products run on the arrays, and
// each rank NGA_Gets its rows of the result:
//   out_in  Y  = X·Wᵀ   GA_Dgemm('N','T')    dX = dY·W ('N','N')    dW = dYᵀ·X ('T','N')
//   in_out  Y  = X·W    GA_Dgemm('N','N')    dX = dY·Wᵀ ('N','T')   dW = Xᵀ·dY ('T','N')
// (GA_Sgemm for f32). GA is set up once per process by the check program (main.cpp: the
// registry's process hooks, GA_Initialize and MA_init after shardcheck initialises MPI).
//
// GA's processes are MPI_COMM_WORLD's: a case runs only when its p is the launch's rank count
// (declines() says so otherwise), and the mesh must number the ranks as GA does (checked).
// Declined as well, each a defect or limit of GA 5.8.2 that the expected-failure entries of
// CMakeLists.txt reproduce:
//   a process holding no rows of some array: GA_Dgemm returns on some processes while another
//     is still in its closing pgroup sync (collective mismatch; a hang without shardcheck);
//   a dimension of 1024 or more: pnga_matmul's task list holds MAX_CHUNKS = 1024 row chunks; GA
//     aborts past it, and its regular path never gets through exactly 1024 (it rebuilds an empty
//     task list forever: p = 2, M = 2, N = 1024, K = 1, out_in spins until the watchdog ends the
//     case). The chunk sizes come from GA's memory heuristics; a chunk has at least one row, so
//     dimensions under 1024 are the bound that holds whatever they pick.
//
// Claims.
//   chains: Y K, dX N, dW M. GA's matmul computes each chunk of C with a local gemm over a
//     chunk of k and puts the first chunk, then accumulates (NGA_Acc, alpha 1) the rest, in an
//     order that the irregular path leaves to arrival; any order is a tree of k − 1 additions.
//   determinism: not claimed (not deterministic by design: GA's irregular matmul accumulates
//     partial products into one block from several processes in arrival order).
//   collectives (ledger): every raw MPI call of each phase on rank me, in order, replayed from GA
//     5.8.2's and ARMCI-MPI 0.3.1's source (ledger(), ga_ledger.hpp): each array's window
//     (all-reduce, MPI_Win_allocate, all-gather of bases, lock_all; GA's syncs and all-reduce
//     around it), its free, the syncs (a flush_all per live window and a barrier), and each
//     transfer row by row (NGA_Put: MPI_Accumulate(REPLACE) and a flush_local; NGA_Get:
//     MPI_Get_accumulate(NO_OP) and, to wait, a flush_local_all per live window; NGA_Acc:
//     MPI_Accumulate(SUM)), to the processes of a patch in GA's shuffled iterator order.
//     GA_Dgemm's path and chunks follow from every process's blocks and MA's free memory, which
//     the claim reads where GA does (MA_inquire_avail). Nothing depends on timing (no polling:
//     waits are flushes, the irregular path deals chunks by index, accumulates are atomic MPI
//     calls). Claimed on every case taken, except: not when an ARMCI_* variable (or
//     COMEX_MAX_NB_OUTSTANDING) is set (the replay assumes ARMCI-MPI's defaults), not when MA is
//     not set up (explain without --record), not when GA's task list cannot take C's row
//     chunks (1024 or more: GA aborts above, spins at exactly 1024).
//   memory: each phase's peak on rank me, from GA 5.8.2's and ARMCI-MPI 0.3.1's source (peak()):
//     the largest of pnga_matmul's buffer and the outputs the adapter copies out (the buffer is
//     taken and freed inside each GA_Dgemm, the outputs are made after the last), plus one strided
//     transfer's I/O vectors (24 bytes a row of the largest array), plus GA's and ARMCI-MPI's
//     bookkeeping (a measured constant and a per-rank term; forward_book … below).
//       The buffer: gai_get_armci_memory asks ARMCI_Malloc_local for
//       ((2·nbuf + 1)·1024² + 3·nbuf·16/e)·e bytes for elements of e bytes, nbuf 1 on one
//       process and 2 on more (GA_Cluster_nnodes() > 1: ARMCI-MPI makes every process a node):
//       25,165,872 B for f64 on one process, 41,943,136 B on two or more, about half for f32. Its
//       size does not depend on the shape; it is taken whenever the chunks fit in it, which every
//       dimension under 1024 (the cases this adapter takes) does, else GA falls back on MA's
//       stack, allocated once by MA_init (no heap in the phase: the bound still holds).
//       The transfers: ARMCI-MPI moves a strided patch as an I/O vector (ARMCI_STRIDED_METHOD=IOV
//       under Open MPI), a source and a destination pointer per row, and NGA_Acc's
//       ARMCII_Buf_prepare_acc_vec one more per row; they live only inside the call that issues
//       the transfer (ARMCI-MPI frees them before it returns, non-blocking calls included).
//     What is counted where. ARMCI_Malloc_local is an MPI_Alloc_mem, which no wrapper of
//     shardcheck's marks as MPI's: the buffer counts as the kernel's (it is the library asking).
//     GA's arrays (NGA_Create → ARMCI_Malloc → ARMCI-MPI's gmr_create) are MPI_Win_allocate'd
//     (ARMCI_USE_WIN_ALLOCATE=1, the default): their storage is allocated inside a recorded MPI
//     call, so it counts in MPI's meter, never in the peak (verify's `MPI's own heap inside the
//     kernel's calls`, --json's max_mpi_heap_bytes: 306.3 KiB at p = 2, M = 200, N = 100,
//     K = 300, f64), while GA's handle tables and ARMCI-MPI's gmr_t and slice table beside each
//     window are malloc'd outside MPI and are in the bookkeeping. Example, f64 on p = 2: forward
//     41,943,136 + 24·max(M, W's rows) + 512 + 2·192 bytes.
#pragma once
#include <ga.h>
#include <macdecls.h>
#include <mpi.h>
#include <unistd.h>  // environ

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <shardcheck/parallel/kernel.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "ga_ledger.hpp"

// GA's own process-grid heuristic (global/src/decomp.c): a local computation, no communication.
// Integer is GA's Fortran integer, 64-bit in Debian's build (ga-config --fint:
// -fdefault-integer-8).
extern "C" void ddb(long ndims, long ardims[], long npes, long blk[], long pedims[]);

namespace mylab {
namespace sc = shardcheck::par;

// GA takes int sizes: a larger one is a bad case, not a silent wrap.
[[nodiscard]] inline int ga_int(std::int64_t v, const char* what) {
  if (v < 0 || v > std::numeric_limits<int>::max())
    throw shardcheck::invalid_problem(std::string("ga_dgemm: ") + what + " = " + std::to_string(v) +
                                      " does not fit GA's int");
  return static_cast<int>(v);
}

// The rows each process holds of a rows × cols array that NGA_Create makes with chunk {-1, cols}
// (rows left to GA, all columns in one block) on p processes: GA 5.8.2's pnga_allocate, default
// distribution, replayed. The C interface hands GA the dimensions reversed (columns first, as
// Fortran numbers them); ddb picks the process grid, then block q gets blk rows (blk − 1 past
// pcut) while rows remain, and processes past the last block hold none.
[[nodiscard]] inline sc::partition ga_rows(std::int64_t rows, std::int64_t cols, int p) {
  // A zero-length dimension GA cannot create (the kernel declines it): no rows anywhere.
  if (rows < 1 || cols < 1)
    return sc::partition(std::vector<std::int64_t>(static_cast<std::size_t>(p), 0));
  long dims[2] = {static_cast<long>(cols), static_cast<long>(rows)};
  long blk[2] = {static_cast<long>(cols), -1};  // GA_MIN(chunk, dims)
  for (long& b : blk)
    if (b == 0) b = 1;
  for (int d = 0; d < 2; ++d)
    if (dims[d] == 1) blk[d] = 1;
  long pe[2] = {0, 0};
  ddb(2, dims, p, blk, pe);
  std::vector<std::int64_t> sizes(static_cast<std::size_t>(p), 0);
  const long pcut = dims[1] - (blk[1] - 1) * pe[1];
  long i = 0;
  for (long q = 0; q < pe[1] && i < dims[1]; ++q) {
    const long b = q >= pcut ? blk[1] - 1 : blk[1];
    sizes.at(static_cast<std::size_t>(q * pe[0])) = b;
    i += b;
  }
  return sc::partition(std::move(sizes));
}

// A global array, destroyed with its scope.
class global_array {
 public:
  global_array(int type, std::int64_t rows, std::int64_t cols, const char* name) {
    int dims[2] = {ga_int(rows, "rows"), ga_int(cols, "cols")};
    int chunk[2] = {-1, dims[1]};
    handle_ = NGA_Create(type, 2, dims, const_cast<char*>(name), chunk);
    if (handle_ == 0) throw std::runtime_error(std::string("NGA_Create failed for ") + name);
  }
  ~global_array() { GA_Destroy(handle_); }
  global_array(const global_array&) = delete;
  global_array& operator=(const global_array&) = delete;
  [[nodiscard]] int get() const { return handle_; }

 private:
  int handle_ = 0;
};

class ga_dgemm : public sc::kernel {
 public:
  explicit ga_dgemm(std::string name = "ga_dgemm", bool guarded = true, bool deterministic = false)
      : guard_(guarded) {
    info_.name = std::move(name);
    info_.summary = "Global Arrays' GA_Dgemm/GA_Sgemm on row-blocked global arrays";
    info_.takes.min_dim = 1;  // NGA_Create refuses a zero-length dimension
    info_.deterministic = deterministic;
  }
  const sc::kernel_info& info() const override { return info_; }

  sc::layout placement(sc::tensor_slot, const sc::run_case&) const override {
    return {sc::placement::S(0)};
  }

  std::optional<std::string> declines(const sc::run_case& c) const override {
    int up = 0;
    MPI_Initialized(&up);
    if (up != 0) {
      int world = 0;
      MPI_Comm_size(MPI_COMM_WORLD, &world);
      if (c.p != world)
        return "p=" + std::to_string(c.p) + " is not the " + std::to_string(world) +
               " ranks of MPI_COMM_WORLD, Global Arrays' process group";
    }
    // pnga_matmul's task list holds MAX_CHUNKS = 1024 row chunks of C's block (matmul.h); a chunk
    // has at least one row, so no dimension under 1024 can reach it. Beyond it GA aborts
    // ("Increase MAX_CHUNKS value in matmul.h"), and at exactly 1024 its regular path spins, for
    // chunk sizes its memory heuristics pick.
    if (guard_)
      for (const char* d : {"M", "N", "K"})
        if (const auto n = sc::dim_length(c.prob, d); n >= 1024)
          return std::string(d) + "=" + std::to_string(n) +
                 " is 1024 or more: GA 5.8.2's GA_Dgemm aborts when C's block needs more than "
                 "MAX_CHUNKS = 1024 row chunks and spins at exactly 1024 (library defects)";
    if (guard_)
      for (const auto& [key, part] : library_partitions(c))
        for (int q = 0; q < c.p; ++q)
          if (part.size(q) == 0)
            return "GA gives process " + std::to_string(q) + " no rows of " + key + " (part." +
                   key + "=" + part.to_string() +
                   "): GA 5.8.2's GA_Dgemm then runs a different sequence of collectives on "
                   "different processes (a known defect)";
    return std::nullopt;
  }

  std::map<std::string, sc::partition> library_partitions(const sc::run_case& c) const override {
    const auto& p = c.prob;
    const bool out_in = p.layout == shardcheck::weight_layout::out_in;
    // X, Y, dY, dX have M rows; their column counts do not change ddb's row split.
    std::map<std::string, sc::partition> out{{"M", ga_rows(p.M, p.K, c.p)}};
    if (out_in)
      out.emplace("N", ga_rows(p.N, p.K, c.p));
    else
      out.emplace("K", ga_rows(p.K, p.N, c.p));
    return out;
  }

  sc::claims cost(const sc::run_case& c, std::span<const int> coords) const override {
    sc::claims out;
    out.chains = std::vector<sc::chain_lengths>{{c.prob.K, c.prob.N, c.prob.M}};
    out.peak = peak(c, coords[0]);
    out.collectives = ledger(c, coords[0]);
    return out;
  }

  // Whether ARMCI-MPI runs with its defaults: no ARMCI_* variable (nor GA's
  // COMEX_MAX_NB_OUTSTANDING) in the environment, which ga_ledger.hpp's replay assumes.
  [[nodiscard]] static bool armci_defaults() {
    for (char** v = environ; v != nullptr && *v != nullptr; ++v) {
      const std::string_view s(*v);
      if (s.starts_with("ARMCI_") || s.starts_with("COMEX_MAX_NB_OUTSTANDING=")) return false;
    }
    return true;
  }

  // Rank me's raw MPI calls in each phase, replayed from GA's and ARMCI-MPI's source
  // (ga_ledger.hpp): nothing when ARMCI-MPI is configured otherwise or MA is not set up (GA's
  // matmul reads MA's free memory, MA_inquire_avail, for its chunks).
  [[nodiscard]] static std::optional<sc::claims::collective_claim> ledger(const sc::run_case& c,
                                                                          int me) {
    if (!armci_defaults() || MA_initialized() == 0) return std::nullopt;
    const auto& p = c.prob;
    const bool out_in = p.layout == shardcheck::weight_layout::out_in;
    const bool f32 = p.type == shardcheck::dtype::f32;
    const std::int64_t e = f32 ? 4 : 8, avail = MA_inquire_avail(f32 ? C_FLOAT : C_DBL);
    const std::int64_t wr = out_in ? p.N : p.K, wc = out_in ? p.K : p.N;
    // X and dX, W and dW, Y and dY: the same shapes, dealt alike.
    const ga_ledger::array x{ga_rows(p.M, p.K, c.p), p.K}, w{ga_rows(wr, wc, c.p), wc},
        y{ga_rows(p.M, p.N, c.p), p.N};
    ga_ledger::replay fwd(c.p, me, e, avail);
    for (const auto* a : {&x, &w, &y}) fwd.create(*a);
    fwd.put_own(x);
    fwd.put_own(w);
    fwd.gemm('N', out_in ? 'T' : 'N', p.M, p.N, p.K, x, w, y);
    fwd.get_own(y);
    for (int i = 0; i < 3; ++i) fwd.destroy();
    ga_ledger::replay bwd(c.p, me, e, avail);
    for (const auto* a : {&x, &w, &y, &x, &w}) bwd.create(*a);  // X, W, dY, dX, dW
    bwd.put_own(x);
    bwd.put_own(w);
    bwd.put_own(y);
    bwd.gemm('N', out_in ? 'N' : 'T', p.M, p.K, p.N, y, w, x);
    if (out_in)
      bwd.gemm('T', 'N', p.N, p.K, p.M, y, x, w);
    else
      bwd.gemm('T', 'N', p.K, p.N, p.M, x, y, w);
    bwd.get_own(x);
    bwd.get_own(w);
    for (int i = 0; i < 5; ++i) bwd.destroy();
    if (!fwd.replayed() || !bwd.replayed()) return std::nullopt;
    return sc::claims::collective_claim{fwd.take(), bwd.take()};
  }

  // pnga_matmul's buffer (gai_get_armci_memory, matmul.c/matmul.h of GA 5.8.2): BLOCK_SIZE² =
  // 1024² elements for each of nbuf A chunks, nbuf B chunks and one C chunk, plus
  // nbuf·NUM_MATS·sizeof(DoubleComplex)/e "for safety", taken with ARMCI_Malloc_local
  // (MPI_Alloc_mem of that many bytes). nbuf is 2 when GA_Cluster_nnodes() > 1 (its non-blocking
  // path; ARMCI-MPI makes every process a node), 1 on one process.
  [[nodiscard]] static std::int64_t matmul_buffer(int p, std::int64_t e) {
    const std::int64_t nbuf = p > 1 ? 2 : 1, block = 1024;
    return ((2 * nbuf + 1) * block * block + nbuf * 3 * 16 / e) * e;
  }

  // The heap GA, ARMCI-MPI and the adapter hold at most in each phase on rank me (see the header).
  [[nodiscard]] static sc::claims::peak_claim peak(const sc::run_case& c, int me) {
    const auto& p = c.prob;
    const bool out_in = p.layout == shardcheck::weight_layout::out_in;
    const std::int64_t e = p.type == shardcheck::dtype::f32 ? 4 : 8;
    const std::int64_t wr = out_in ? p.N : p.K, wc = out_in ? p.K : p.N;
    // This rank's rows of X (Y, dY, dX) and of W (dW), as GA deals them.
    const std::int64_t m = ga_rows(p.M, p.K, c.p).size(me), w = ga_rows(wr, wc, c.p).size(me);
    // One strided transfer's I/O vectors (ARMCII_Strided_to_iov: a source and a destination
    // pointer per row; NGA_Acc adds ARMCII_Buf_prepare_acc_vec's pointer per row): at most 24
    // bytes per row of the largest array.
    const std::int64_t transfer = 24 * std::max(p.M, wr);
    // The buffer lives inside each GA_Dgemm, the outputs after them: never both.
    const std::int64_t fwd = std::max(matmul_buffer(c.p, e), e * m * p.N);
    const std::int64_t bwd = std::max(matmul_buffer(c.p, e), e * (m * p.K + w * wc));
    return {fwd + transfer + forward_book + forward_book_per_rank * c.p,
            bwd + transfer + backward_book + backward_book_per_rank * c.p};
  }

  void forward(sc::context& ctx, const sc::run_case& c, const sc::forward_io& io) const override {
    io.visit([&]<class T>(const sc::matrix<T>& x, sc::weights<T> w, sc::matrix<T>& y) {
      check_group(ctx, c);
      const auto& p = c.prob;
      const bool out_in = p.layout == shardcheck::weight_layout::out_in;
      const global_array gx(ga_type<T>(), p.M, p.K, "X");
      const global_array gw(ga_type<T>(), out_in ? p.N : p.K, out_in ? p.K : p.N, "W");
      const global_array gy(ga_type<T>(), p.M, p.N, "Y");
      put_local(gx, x);
      put_local(gw, w[0]);
      gemm<T>('N', out_in ? 'T' : 'N', p.M, p.N, p.K, gx, gw, gy);
      y = get_local<T>(gy);
    });
  }

  void backward(sc::context& ctx, const sc::run_case& c, const sc::backward_io& io) const override {
    io.visit([&]<class T>(const sc::matrix<T>& x, sc::weights<T> w, const sc::matrix<T>& dy,
                          sc::matrix<T>& dx, sc::gradients<T> dws) {
      check_group(ctx, c);
      const auto& p = c.prob;
      const bool out_in = p.layout == shardcheck::weight_layout::out_in;
      const std::int64_t wr = out_in ? p.N : p.K, wc = out_in ? p.K : p.N;
      const global_array gx(ga_type<T>(), p.M, p.K, "X");
      const global_array gw(ga_type<T>(), wr, wc, "W");
      const global_array gdy(ga_type<T>(), p.M, p.N, "dY");
      const global_array gdx(ga_type<T>(), p.M, p.K, "dX");
      const global_array gdw(ga_type<T>(), wr, wc, "dW");
      put_local(gx, x);
      put_local(gw, w[0]);
      put_local(gdy, dy);
      gemm<T>('N', out_in ? 'N' : 'T', p.M, p.K, p.N, gdy, gw, gdx);
      if (out_in)
        gemm<T>('T', 'N', p.N, p.K, p.M, gdy, gx, gdw);
      else
        gemm<T>('T', 'N', p.K, p.N, p.M, gx, gdy, gdw);
      dx = get_local<T>(gdx);
      dws[0] = get_local<T>(gdw);
    });
  }

 protected:
  template <class T>
  static int ga_type() {
    return std::is_same_v<T, double> ? C_DBL : C_FLOAT;
  }

  // GA's processes are the world's: the mesh must number them alike.
  static void check_group(sc::context& ctx, const sc::run_case& c) {
    if (GA_Nnodes() != c.p || GA_Nodeid() != ctx.grid.all().rank())
      throw std::runtime_error(
          "GA process " + std::to_string(GA_Nodeid()) + " of " + std::to_string(GA_Nnodes()) +
          " is mesh rank " + std::to_string(ctx.grid.all().rank()) + " of " + std::to_string(c.p));
  }

  // This rank's rows [lo, hi] of array g as GA distributes them (hi < lo: none).
  static std::pair<int, int> my_rows(const global_array& g) {
    int lo[2] = {0, 0}, hi[2] = {-1, -1};
    NGA_Distribution(g.get(), GA_Nodeid(), lo, hi);
    return {lo[0], hi[0]};
  }

  // This rank's block (shardcheck's local matrix, row-major) into its rows of g. No GA_Sync after
  // it: every put is followed by a GA_Dgemm, which opens with pnga_pgroup_sync (ARMCI_AllFence
  // and a barrier, the same as GA_Sync; matmul.c) before it reads an operand.
  template <class T>
  static void put_local(const global_array& g, const sc::matrix<T>& m) {
    const auto [lo, hi] = my_rows(g);
    const auto held = hi < lo ? 0 : static_cast<std::size_t>(hi - lo + 1);
    if (held != m.rows)
      throw std::runtime_error("GA gives this rank " + std::to_string(held) +
                               " rows, the partition reported " + std::to_string(m.rows));
    if (m.rows == 0 || m.cols == 0) return;
    int l[2] = {lo, 0}, h[2] = {hi, static_cast<int>(m.cols) - 1},
        ld[1] = {static_cast<int>(m.cols)};
    NGA_Put(g.get(), l, h, const_cast<T*>(m.row(0)), ld);
  }

  template <class T>
  static sc::matrix<T> get_local(const global_array& g) {
    const auto [lo, hi] = my_rows(g);
    int type = 0, ndim = 0, dims[2] = {0, 0};
    NGA_Inquire(g.get(), &type, &ndim, dims);
    sc::matrix<T> m(hi < lo ? 0 : static_cast<std::size_t>(hi - lo + 1),
                    static_cast<std::size_t>(dims[1]));
    if (m.rows > 0 && m.cols > 0) {
      int l[2] = {lo, 0}, h[2] = {hi, dims[1] - 1}, ld[1] = {dims[1]};
      NGA_Get(g.get(), l, h, m.row(0), ld);
    }
    return m;
  }

  // C = op(A)·op(B), C m × n, contraction k.
  template <class T>
  static void gemm(char ta, char tb, std::int64_t m, std::int64_t n, std::int64_t k,
                   const global_array& a, const global_array& b, const global_array& c) {
    if constexpr (std::is_same_v<T, double>)
      GA_Dgemm(ta, tb, ga_int(m, "m"), ga_int(n, "n"), ga_int(k, "k"), 1.0, a.get(), b.get(), 0.0,
               c.get());
    else
      GA_Sgemm(ta, tb, ga_int(m, "m"), ga_int(n, "n"), ga_int(k, "k"), 1.0F, a.get(), b.get(), 0.0F,
               c.get());
  }

  // GA's and ARMCI-MPI's bookkeeping, which no size of the case changes: per array GA's handle
  // tables and maps, ARMCI-MPI's gmr_t and its slice table (16 bytes a rank), GA's iterator of
  // each transfer (a map and process lists of a few words a rank), pnga_matmul's task state. The
  // largest measured of each phase less the terms above (240 cases at 1–4 ranks, generated
  // shapes, both layouts and dtypes: forward 484, 664, 812, 960 B and backward 724, 952, 1148,
  // 912 B at p = 1 … 4), bounded by a line in p and rounded up to 64 bytes with room above it.
  static constexpr std::int64_t forward_book = 512, forward_book_per_rank = 192;
  static constexpr std::int64_t backward_book = 768, backward_book_per_rank = 256;

  sc::kernel_info info_;
  bool guard_ = true;
};

}  // namespace mylab
