// SUMMA against ScaLAPACK's PDGEMM: the forward Y = X·Wᵀ (out_in, double) of two shapes, square
// 2048³ and skinny M = 8192, N = K = 512, on the same pr × pc grid of the run's ranks, both grids
// of two ranks (1×2 and 2×1). SUMMA runs on shardcheck's blocks (one block per rank, K panels
// broadcast along the mesh rows and columns); PDGEMM on ScaLAPACK's 2D block-cyclic layout
// (blocks of nb × nb, the usual way to call it), BLACS grid pr × pc in row-major order, so that
// BLACS process (i, j) is the rank SUMMA calls (i, j). Both use the same OpenBLAS dgemm
// (libblas.so.3 is OpenBLAS on Debian) with one thread per rank.
// Each configuration's result is checked once before timing against the single-device reference
// within the derived per-element bound (γ_kpar + γ_kref)·(|X||W|ᵀ)_ij: SUMMA through the forward
// property, PDGEMM block by block with k_par = K (it adds the K panels into C one after another,
// the same chain as SUMMA's).
//
//   mpirun -n 2 build/bench/shardcheck_bench_summa
//
// Side by side, before timing: the bytes each rank sent and received in one forward, as recorded
// (SUMMA's mesh collectives through its ledger; PDGEMM's BLACS calls through the PMPI layer, the
// BLACS grid made from the world communicator inside the recording window), e.g.
//   recorded square 1×2, bytes sent/received per rank: SUMMA r0 …/… r1 …/…; PDGEMM r0 …/… …
// PMPI records MPI_Bcast, MPI_Reduce (BLACS's ?gsum2d combines PBLAS's partial products with it),
// MPI_Allreduce and point-to-point sends and receives.
//
// Counter GFLOPs = 2·M·N·K / time. Iterations and repetitions are fixed (every rank must run the
// same collectives); the manual time of an iteration is the slowest rank's; only rank 0 reports.
#include <benchmark/benchmark.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mpi_bench.hpp"
#include "shardcheck/parallel/comm.hpp"
#include "shardcheck/parallel/kernel.hpp"
#include "shardcheck/parallel/plan.hpp"
#include "shardcheck/parallel/pmpi.hpp"
#include "shardcheck/properties/harness.hpp"
#include "shardcheck/properties/verdict.hpp"
#include "shardcheck/reference/data.hpp"
#include "shardcheck/reference/gemm.hpp"
#include "strategies/summa.hpp"

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
}

namespace {

using namespace shardcheck;
struct shape {
  const char* name;
  int m, n, k;
};
constexpr shape shapes[] = {{"square", 2048, 2048, 2048}, {"skinny", 8192, 512, 512}};
constexpr int grid_rows[] = {1, 2};  // pr; pc = ranks / pr
constexpr int nb = 128;              // ScaLAPACK's block size
constexpr std::uint64_t seed = 1;
par::comm* world = nullptr;
const par::summa strategy;

void report_rate(benchmark::State& st, const shape& sh, double seconds) {
  const double flops = 2.0 * sh.m * sh.n * sh.k;
  st.counters["GFLOPs"] =
      seconds > 0 ? flops * static_cast<double>(st.iterations()) / seconds / 1e9 : 0;
}

// --- SUMMA ------------------------------------------------------------------------------------

par::run_case summa_case(const shape& sh, int pr) {
  par::run_case c;
  c.strategy = strategy.name();
  c.p = world->size();
  c.prob.M = sh.m;
  c.prob.N = sh.n;
  c.prob.K = sh.k;
  c.prob.type = dtype::f64;
  c.prob.layout = weight_layout::out_in;
  c.mode = value_mode::uniform;
  c.seed = seed;
  c.params = {{"pr", pr}};
  par::complete_and_validate(strategy, c);
  return c;
}

void summa_forward(benchmark::State& st, shape sh, int pr) {
  const par::run_case c = summa_case(sh, pr);
  par::mesh grid(*world, strategy.mesh_dims(c), par::stack_options{c.backend, {}});
  const prop::rank_inputs in = prop::inputs_of(par::plan_of(strategy, c, grid.coords()), c);
  par::context ctx{grid};
  double total = 0;
  for (auto _ : st) {
    par::any_matrix y;
    const double t = bench::timed(*world, [&] {
      strategy.forward(ctx, c, par::forward_io{in.x, in.ws, y});
    });
    total += t;
    st.SetIterationTime(t);
  }
  report_rate(st, sh, total);
}

// --- PDGEMM -----------------------------------------------------------------------------------

// One distributed matrix in ScaLAPACK's layout: rows × cols, nb × nb blocks dealt cyclically over
// the grid, stored column-major with leading dimension lld.
struct scalapack_matrix {
  int rows = 0, cols = 0, local_rows = 0, local_cols = 0;
  int desc[9] = {};
  std::vector<double> data;
};

class pdgemm_run {
 public:
  pdgemm_run(const shape& sh, int pr) : sh_(sh) {
    const int pc = world->size() / pr;
    handle_ = Csys2blacs_handle(world->native_handle());
    context_ = handle_;
    Cblacs_gridinit(&context_, "Row", pr, pc);
    Cblacs_gridinfo(context_, &nprow_, &npcol_, &myrow_, &mycol_);
    a_ = make(sh.m, sh.k, ref::tensor_id::x);  // X, M×K
    b_ = make(sh.n, sh.k, ref::tensor_id::w);  // W, N×K (out_in)
    c_ = make(sh.m, sh.n, std::nullopt);       // Y, M×N
  }
  ~pdgemm_run() {
    Cblacs_gridexit(context_);
    Cfree_blacs_system_handle(handle_);
  }
  pdgemm_run(const pdgemm_run&) = delete;
  pdgemm_run& operator=(const pdgemm_run&) = delete;

  // Y = X·Wᵀ.
  void run() {
    const int one = 1;
    const double alpha = 1, beta = 0;
    pdgemm_("N", "T", &sh_.m, &sh_.n, &sh_.k, &alpha, a_.data.data(), &one, &one, a_.desc,
            b_.data.data(), &one, &one, b_.desc, &beta, c_.data.data(), &one, &one, c_.desc);
  }

  // This rank's blocks of Y against the verdict's reference (properties/verdict.hpp), each
  // element within its rigorous bound for the chain PDGEMM's sums may take (K: the whole
  // contraction, in any order); the first failure.
  [[nodiscard]] std::string check(double& worst) const {
    par::run_case c;  // the inputs make() deals out: the case's values of X and W
    c.strategy = "pdgemm";
    c.p = world->size();
    c.prob.M = sh_.m;
    c.prob.N = sh_.n;
    c.prob.K = sh_.k;
    c.prob.type = dtype::f64;
    c.prob.layout = weight_layout::out_in;
    c.mode = value_mode::uniform;
    c.seed = seed;
    const std::vector<par::chain_lengths> chains{{sh_.k, sh_.n, sh_.m}};
    const prop::tolerance tol = prop::tolerance_of(c, chains, par::tensor::y, {});
    std::string bad;
    for_each_block(c_, [&](int r0, int mr, int c0, int nc, int li, int lj) {
      if (!bad.empty()) return;
      const auto rows = static_cast<std::size_t>(mr), cols = static_cast<std::size_t>(nc);
      par::matrix<double> got(rows, cols);
      for (std::size_t i = 0; i < rows; ++i)
        for (std::size_t j = 0; j < cols; ++j)
          got.data[i * cols + j] =
              c_.data[static_cast<std::size_t>(lj) * static_cast<std::size_t>(c_.desc[8]) +
                      static_cast<std::size_t>(li) + j * static_cast<std::size_t>(c_.desc[8]) + i];
      const par::block b{r0, mr, c0, nc};
      const prop::judgement j =
          prop::judge_block(tol, got, prop::reference_of_block(c, par::tensor::y, b, {0, sh_.k}));
      worst = std::max(worst, j.worst.err_u_mag);
      if (j.first)
        bad = prop::describe(j, tol,
                             "PDGEMM Y[" + std::to_string(r0 + static_cast<int>(j.first->row)) +
                                 ", " + std::to_string(c0 + static_cast<int>(j.first->col)) + "]");
    });
    return bad;
  }

 private:
  // f(global row0, rows, global col0, cols, local row0, local col0) for each local block.
  template <class F>
  void for_each_block(const scalapack_matrix& mat, F&& f) const {
    for (int lj = 0; lj < mat.local_cols; lj += nb) {
      const int c0 = (lj / nb * npcol_ + mycol_) * nb, nc = std::min(nb, mat.cols - c0);
      for (int li = 0; li < mat.local_rows; li += nb) {
        const int r0 = (li / nb * nprow_ + myrow_) * nb, mr = std::min(nb, mat.rows - r0);
        f(r0, mr, c0, nc, li, lj);
      }
    }
  }

  scalapack_matrix make(int rows, int cols, std::optional<ref::tensor_id> id) const {
    scalapack_matrix mat;
    mat.rows = rows;
    mat.cols = cols;
    const int zero = 0;
    mat.local_rows = numroc_(&rows, &nb, &myrow_, &zero, &nprow_);
    mat.local_cols = numroc_(&cols, &nb, &mycol_, &zero, &npcol_);
    const int lld = std::max(1, mat.local_rows);
    int info = 0;
    descinit_(mat.desc, &rows, &cols, &nb, &nb, &zero, &zero, &context_, &lld, &info);
    if (info != 0) throw error("descinit_ failed: info " + std::to_string(info));
    mat.data.assign(
        static_cast<std::size_t>(lld) * static_cast<std::size_t>(std::max(1, mat.local_cols)), 0.0);
    if (!id) return mat;
    std::vector<double> tile(static_cast<std::size_t>(nb) * nb);
    for_each_block(mat, [&](int r0, int mr, int c0, int nc, int li, int lj) {
      ref::fill_block<double>(value_mode::uniform, seed, static_cast<std::uint32_t>(*id),
                              static_cast<std::uint64_t>(r0), static_cast<std::uint64_t>(mr),
                              static_cast<std::uint64_t>(c0), static_cast<std::uint64_t>(nc),
                              tile.data());
      for (int i = 0; i < mr; ++i)
        for (int j = 0; j < nc; ++j)
          mat.data[static_cast<std::size_t>(lj + j) * static_cast<std::size_t>(lld) +
                   static_cast<std::size_t>(li + i)] = tile[static_cast<std::size_t>(i * nc + j)];
    });
    return mat;
  }

  shape sh_;
  int handle_ = 0, context_ = 0, nprow_ = 0, npcol_ = 0, myrow_ = 0, mycol_ = 0;
  scalapack_matrix a_, b_, c_;
};

void pdgemm_forward(benchmark::State& st, shape sh, int pr) {
  pdgemm_run run(sh, pr);
  double total = 0;
  for (auto _ : st) {
    const double t = bench::timed(*world, [&] { run.run(); });
    total += t;
    st.SetIterationTime(t);
  }
  report_rate(st, sh, total);
}

// Bytes sent and received by this rank in the forward entries of a ledger.
std::pair<std::int64_t, std::int64_t> forward_bytes(const std::vector<par::ledger_entry>& log) {
  std::pair<std::int64_t, std::int64_t> out{0, 0};
  for (const par::ledger_entry& e : log)
    if (e.when == par::phase::forward) {
      out.first += e.bytes_sent;
      out.second += e.bytes_received;
    }
  return out;
}

// What one forward of each sent and received on every rank, as recorded, printed by rank 0.
void report_recorded_bytes(const shape& sh, int pr, const par::run_case& c) {
  const auto summa = forward_bytes(prop::recorded_ledger(prop::subject{&strategy, {}}, c, *world));
  par::ledger log;
  {
    const par::pmpi::tracked_comm comms[] = {{world->native_handle(), -1}};
    const par::pmpi::recording window(log, false, comms);
    pdgemm_run run(sh, pr);
    run.run();
  }
  const auto pdgemm = forward_bytes(log.entries());
  const std::int64_t mine[4] = {summa.first, summa.second, pdgemm.first, pdgemm.second};
  std::vector<std::int64_t> all(4 * static_cast<std::size_t>(world->size()));
  MPI_Gather(mine, 4, MPI_INT64_T, all.data(), 4, MPI_INT64_T, 0, world->native_handle());
  if (world->rank() != 0) return;
  std::printf("recorded %s %d×%d, bytes sent/received per rank in one forward:", sh.name, pr,
              world->size() / pr);
  for (int k = 0; k < 2; ++k) {
    if (k == 0)
      std::printf(" SUMMA");
    else
      std::printf("; PDGEMM (nb=%d)", nb);
    for (int r = 0; r < world->size(); ++r)
      std::printf(" r%d %lld/%lld", r, static_cast<long long>(all[4 * r + 2 * k]),
                  static_cast<long long>(all[4 * r + 2 * k + 1]));
  }
  std::printf("\n");
}

bool all_passed(bool mine) {
  int failed = mine ? 0 : 1;
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, world->native_handle());
  return failed == 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Warm pages for both: SUMMA allocates Y and its panels per call, PDGEMM writes into a C
  // allocated once.
  bench::keep_freed_memory();
  par::environment env(argc, argv);
  par::comm w = par::comm::world();
  world = &w;
  bench::initialize({argv, argv + argc}, 5);
  for (const shape& sh : shapes)
    for (int pr : grid_rows) {
      if (w.size() % pr != 0) continue;
      // Check once before timing: SUMMA through the forward property, PDGEMM block by block.
      const par::run_case c = summa_case(sh, pr);
      const auto v = prop::run_on_rank(prop::subject{&strategy, {}}, c, w,
                                       static_cast<unsigned>(prop::property::runs) |
                                           static_cast<unsigned>(prop::property::forward));
      if (!all_passed(v.failed == 0)) {
        if (v.failed != 0) std::fprintf(stderr, "SUMMA check failed: %s\n", v.message.c_str());
        return 1;
      }
      double worst = 0;
      std::string bad;
      {
        pdgemm_run run(sh, pr);
        run.run();
        bad = run.check(worst);
      }
      if (!all_passed(bad.empty())) {
        if (!bad.empty()) std::fprintf(stderr, "check failed: %s\n", bad.c_str());
        return 1;
      }
      worst = bench::max_over_ranks(*world, worst);
      if (w.rank() == 0)
        std::printf("checked %s %d×%d: SUMMA worst error %.2f·u·mag, PDGEMM %.2f·u·mag\n", sh.name,
                    pr, w.size() / pr, bench::max_over_ranks(*world, v.worst_error), worst);
      else
        (void)bench::max_over_ranks(*world, v.worst_error);
      report_recorded_bytes(sh, pr, c);
      const std::string suffix = std::string("/") + sh.name + "/grid:" + std::to_string(pr) + "x" +
                                 std::to_string(w.size() / pr);
      for (auto* b :
           {benchmark::RegisterBenchmark(("summa" + suffix).c_str(), summa_forward, sh, pr),
            benchmark::RegisterBenchmark(("pdgemm" + suffix).c_str(), pdgemm_forward, sh, pr)})
        b->Iterations(3)->UseManualTime()->Unit(benchmark::kMillisecond);
    }
  bench::silent_reporter quiet;
  if (w.rank() == 0)
    benchmark::RunSpecifiedBenchmarks();
  else
    benchmark::RunSpecifiedBenchmarks(&quiet);
  benchmark::Shutdown();
  return 0;
}
