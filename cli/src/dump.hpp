#pragma once
// `verify --replay LINE --dump DIR`: the case's values as .npy files numpy.load reads, with a
// README.txt naming each and case.json holding what judges them (u, chains, the verdict
// recomputed from the files). A single layer's case; a stack is refused (the oracle is a single
// layer's).
//
//   mpirun -n 2 shardcheck verify --replay 'strategy=row_parallel p=2 M=4 N=3 K=8 …' --dump d/
//   python3 -c "import numpy; print(numpy.load('d/y_parallel.npy'))"
#include <string>

#include "shardcheck/parallel/comm.hpp"
#include "shardcheck/properties/harness.hpp"

namespace shardcheck::dump {

// Throws error when case c cannot be dumped (a stack), before anything runs.
void check_dumpable(const par::run_case& c);

// Runs case c once more on ranks 0 … c.p − 1 of world, gathers its outputs on rank 0 and writes
// DIR/{x,w,dy}.npy, DIR/{y,dx,dw}_{parallel,reference,oracle,magnitude}.npy, case.json and
// README.txt there. Throws error (every rank alike) when DIR cannot be written, the case is a
// stack, or the run fails. \note collective over world.
void write_case(const prop::subject& s, const par::run_case& c, par::comm& world,
                const std::string& dir);

}  // namespace shardcheck::dump
