#pragma once
// The fault operators of faults.hpp acting on a kernel's own MPI calls: an interceptor
// (pmpi.hpp) that the harness installs in a mutant case's recording window hands each recorded
// blocking collective to the same layer a checked comm would wrap, built over an inner layer that
// runs the kernel's call as it made it, or the call the fault issues instead.
//
//   position below  the hand-over around the MPI call itself, after the fingerprint: the ledger
//                   records the call asked for; what the layer issues instead goes to PMPI.
//   position above  the hand-over before the fingerprint: what the layer issues instead (a
//                   barrier in place of a skipped call, an extra barrier) goes through the
//                   wrappers, fingerprinted and recorded as the kernel's.
//
// Offered: MPI_Allgather(v) with the parts end to end in rank order, MPI_Allreduce with MPI_SUM,
// MPI_Reduce_scatter(_block) with MPI_SUM and a send buffer, MPI_Bcast, MPI_Barrier, all of floats
// or doubles. Not offered (the fault never acts on them, and the cell reads "never acted"): the
// started forms, MPI_Reduce, MPI_Alltoall(v), point-to-point and one-sided calls, other datatypes
// and operations. Example: mutant.ag_reversed@raw_data_parallel reverses the parts of the
// kernel's MPI_Allgatherv of Y's rows on every rank: `forward` fails.
//
// The layers for the mesh's communicators are built with the interceptor (before any measured
// scope); one for a communicator the kernel derives is built at its first offered call.
#include <mpi.h>

#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "mutants/faults.hpp"
#include "shardcheck/parallel/pmpi.hpp"

namespace shardcheck::prop::mutants {

using layer_maker = std::function<std::unique_ptr<par::collectives>(
    std::unique_ptr<par::collectives>, std::shared_ptr<fire_log>)>;

class raw_inner;

class raw_faults final : public par::pmpi::interceptor {
 public:
  // comms: the case's mesh communicators, whose layers are built now.
  raw_faults(par::layer_position where, layer_maker make, std::shared_ptr<fire_log> log,
             std::span<const MPI_Comm> comms);
  ~raw_faults() override;
  raw_faults(const raw_faults&) = delete;
  raw_faults& operator=(const raw_faults&) = delete;
  int intercept(stage s, const par::pmpi::raw_collective& c, par::pmpi::run_ref run) override;

 private:
  struct per_comm {
    MPI_Comm comm = MPI_COMM_NULL;
    raw_inner* inner = nullptr;  // owned by layer
    std::unique_ptr<par::collectives> layer;
  };
  per_comm& layer_for(MPI_Comm comm);

  par::layer_position where_;
  layer_maker make_;
  std::shared_ptr<fire_log> log_;
  std::vector<per_comm> layers_;
  untracked_vector<std::int64_t> counts_;
  bool busy_ = false;  // a call of the layer's own is running: passed on
};

}  // namespace shardcheck::prop::mutants
