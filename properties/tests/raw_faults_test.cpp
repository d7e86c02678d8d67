// The fault operators on raw MPI calls (raw_faults.hpp) under mpirun: a fault below the
// fingerprint changes the data and leaves the ledger as asked; one above is fingerprinted and
// recorded as the kernel's call; a fault with nothing offered never acts.
#include <gtest/gtest.h>

#include <mpi.h>
#include "mpi_environment.hpp"

#include <numeric>
#include <string>
#include <vector>

#include "mutants/faults.hpp"
#include "mutants/raw_faults.hpp"
#include "shardcheck/parallel/comm.hpp"
#include "shardcheck/parallel/pmpi.hpp"

using namespace shardcheck;
namespace mu = shardcheck::prop::mutants;

namespace {
template <class L>
mu::layer_maker maker() {
  return [](std::unique_ptr<par::collectives> in, std::shared_ptr<mu::fire_log> log) {
    return std::unique_ptr<par::collectives>(std::make_unique<L>(std::move(in), std::move(log)));
  };
}

// A kernel's raw MPI_Allgatherv of one double per rank (rank r holds r + 1) and MPI_Allreduce of
// 3, under the fault: what it got, what was recorded, how often the fault acted, the error.
struct outcome {
  std::vector<double> y, dw;
  std::vector<par::collective> kinds;
  std::int64_t acts = 0;
  std::string error;
};
outcome run(par::layer_position where, const mu::layer_maker& make) {
  test::need_mpi();
  MPI_Comm c = MPI_COMM_NULL;
  PMPI_Comm_dup(MPI_COMM_WORLD, &c);
  int me = 0, p = 1;
  PMPI_Comm_rank(c, &me);
  PMPI_Comm_size(c, &p);
  std::vector<int> counts(static_cast<std::size_t>(p), 1), displs(counts.size());
  std::iota(displs.begin(), displs.end(), 0);
  outcome o;
  o.y.assign(counts.size(), 0.0);
  o.y[static_cast<std::size_t>(me)] = me + 1;
  o.dw.assign(3, me + 1.0);
  par::ledger log;
  auto fired = std::make_shared<mu::fire_log>();
  const std::vector<MPI_Comm> comms{c};
  const par::pmpi::tracked_comm tracked{c, 0};
  {
    mu::raw_faults hook(where, make, fired, comms);
    try {
      const par::pmpi::recording rec(log, true, std::span(&tracked, 1), &hook);
      MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, o.y.data(), counts.data(), displs.data(),
                     MPI_DOUBLE, c);
      MPI_Allreduce(MPI_IN_PLACE, o.dw.data(), 3, MPI_DOUBLE, MPI_SUM, c);
    } catch (const std::exception& e) {
      o.error = e.what();
    }
  }
  for (const par::ledger_entry& e : log.entries()) o.kinds.push_back(e.kind);
  o.acts = fired->acts;
  PMPI_Comm_free(&c);
  return o;
}

int size() {
  test::need_mpi();
  int p = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  return p;
}
double sum() { return size() * (size() + 1) / 2.0; }
const std::vector<par::collective> asked{par::collective::all_gather, par::collective::all_reduce};
}  // namespace

TEST(raw_faults, ag_reversed_reverses_the_parts_and_records_the_call_asked) {
  if (size() < 2) GTEST_SKIP() << "needs two ranks";
  const outcome o = run(par::layer_position::below, maker<mu::ag_reversed>());
  for (int q = 0; q < size(); ++q) EXPECT_EQ(o.y[static_cast<std::size_t>(q)], size() - q);
  EXPECT_EQ(o.kinds, asked);
  EXPECT_EQ(o.acts, 1);
  EXPECT_EQ(o.dw[0], sum());
}

TEST(raw_faults, ar_skipped_leaves_each_rank_its_own_partial) {
  if (size() < 2) GTEST_SKIP() << "needs two ranks";
  int me = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  const outcome o = run(par::layer_position::below, maker<mu::ar_skipped>());
  EXPECT_EQ(o.dw[0], me + 1.0);
  EXPECT_EQ(o.kinds, asked);
}

TEST(raw_faults, extra_barrier_is_recorded_as_the_kernels) {
  const outcome o = run(par::layer_position::above, maker<mu::extra_barrier>());
  const std::vector<par::collective> want{par::collective::barrier, par::collective::all_gather,
                                          par::collective::all_reduce};
  EXPECT_EQ(o.kinds, want);
  EXPECT_EQ(o.dw[0], sum());
}

TEST(raw_faults, rank0_skips_fails_every_rank_with_a_mismatch) {
  if (size() < 2) GTEST_SKIP() << "needs two ranks";
  const outcome o = run(par::layer_position::above, maker<mu::rank0_skips>());
  EXPECT_NE(o.error.find("collective mismatch"), std::string::npos) << o.error;
}

TEST(raw_faults, a_fault_with_nothing_offered_never_acts) {
  const outcome o = run(par::layer_position::below, maker<mu::started_early>());
  EXPECT_EQ(o.acts, 0);
  EXPECT_EQ(o.kinds, asked);
  EXPECT_EQ(o.dw[0], sum());
}
