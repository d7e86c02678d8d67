#!/usr/bin/env bash
# The README's test command: the format check, the build, every test (unit, property at 1-4 ranks,
# mutant), then the outside kernels built against the installed package (ci/outside_kernel.sh,
# ci/scalapack_kernel.sh: ScaLAPACK's PDGEMM/PSGEMM; ci/petsc_kernel.sh: PETSc's MATMPIDENSE
# products; ci/global_arrays_kernel.sh: Global Arrays' GA_Dgemm), a second tree built against
# MPICH (ci/mpich.sh) and a minute of fuzzing (ci/fuzz.sh). Each step's wall time is printed as it
# ends ("ci/test.sh: <step> took N s").
# Each step runs alone: builds beside ctest slowed its ranks more than they saved (ranks waiting
# in Open MPI yield their core to any runnable process; on two cores the 4-rank suites took 1.5-2x
# as long beside niced builds).
# Extra arguments go to ctest, e.g. `bash ci/test.sh -L mutant`, and skip the outside kernels,
# MPICH and the fuzzing.
set -euo pipefail
source "$(dirname "$0")/env.sh"
step() {
  local name=$1 start=$SECONDS
  shift
  "$@"
  echo "ci/test.sh: $name took $((SECONDS - start)) s"
}
step setup bash "$SHARDCHECK_ROOT/ci/setup.sh"
step format bash "$SHARDCHECK_ROOT/ci/format.sh"
step build bash "$SHARDCHECK_ROOT/ci/build.sh"
cd "$SHARDCHECK_BUILD"
# Two entries at a time on two cores. An entry of more ranks than that says so (PROCESSORS) and
# runs alone, as do those that time a case out or the machine (RUN_SERIAL); every rank yields
# its core when idle (env.sh).
step ctest ctest --output-on-failure --timeout 900 -j "$(nproc)" "$@"
if [ "$#" -eq 0 ]; then
  step outside_kernel bash "$SHARDCHECK_ROOT/ci/outside_kernel.sh"
  step scalapack_kernel bash "$SHARDCHECK_ROOT/ci/scalapack_kernel.sh"
  step petsc_kernel bash "$SHARDCHECK_ROOT/ci/petsc_kernel.sh"
  step global_arrays_kernel bash "$SHARDCHECK_ROOT/ci/global_arrays_kernel.sh"
  step mpich bash "$SHARDCHECK_ROOT/ci/mpich.sh"
  step fuzz bash "$SHARDCHECK_ROOT/ci/fuzz.sh"
fi
