#!/usr/bin/env bash
# The README's test command: the format check, the build, every test (unit, property at 1-4 ranks,
# mutant), then the outside kernels built against the installed package (ci/outside_kernel.sh,
# ci/scalapack_kernel.sh: ScaLAPACK's PDGEMM/PSGEMM; ci/petsc_kernel.sh: PETSc's MATMPIDENSE
# products; ci/global_arrays_kernel.sh: Global Arrays' GA_Dgemm), a second tree built against
# MPICH (ci/mpich.sh) and a minute of fuzzing (ci/fuzz.sh). Each step's wall time is printed as it
# ends ("ci/test.sh: <step> took N s").
# The example kernels (in $SHARDCHECK_BUILD/examples-ci, from nothing), the MPICH tree and the
# fuzz targets build while ctest runs, at the lowest priority (nice 19): they take the cores the
# tests leave idle (mpirun's start and end, serial entries); their log
# ($SHARDCHECK_BUILD/background-builds.log) is printed if they fail.
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
background=
if [ "$#" -eq 0 ]; then
  export SHARDCHECK_EXAMPLES_WORK=$SHARDCHECK_BUILD/examples-ci
  rm -rf "$SHARDCHECK_EXAMPLES_WORK"
  log=$SHARDCHECK_BUILD/background-builds.log
  setsid -w nice -n 19 bash -c 'set -e
    for example in outside_kernel scalapack_kernel petsc_kernel global_arrays_kernel; do
      bash "$1/ci/$example.sh" --build-only
    done
    bash "$1/ci/mpich.sh" --build-only
    bash "$1/ci/fuzz.sh" --build-only' _ "$SHARDCHECK_ROOT" >"$log" 2>&1 &
  background=$!
  trap 'if [ -n "$background" ]; then kill -- "-$background" 2>/dev/null || true; fi' EXIT
fi
# Two entries at a time on two cores. An entry of more ranks than that says so (PROCESSORS) and
# runs alone, as do those that time a case out or the machine (RUN_SERIAL); every rank yields
# its core when idle (env.sh).
step ctest ctest --output-on-failure --timeout 900 -j "$(nproc)" "$@"
if [ "$#" -eq 0 ]; then
  start=$SECONDS
  if ! wait "$background"; then
    tail -n 80 "$log"
    echo "ci/test.sh: a background build (examples, MPICH tree, fuzz targets) failed ($log)" >&2
    exit 1
  fi
  background=
  echo "ci/test.sh: the background builds (examples, MPICH tree, fuzz targets) took $((SECONDS - start)) s more"
  step outside_kernel bash "$SHARDCHECK_ROOT/ci/outside_kernel.sh"
  step scalapack_kernel bash "$SHARDCHECK_ROOT/ci/scalapack_kernel.sh"
  step petsc_kernel bash "$SHARDCHECK_ROOT/ci/petsc_kernel.sh"
  step global_arrays_kernel bash "$SHARDCHECK_ROOT/ci/global_arrays_kernel.sh"
  step mpich bash "$SHARDCHECK_ROOT/ci/mpich.sh"
  step fuzz bash "$SHARDCHECK_ROOT/ci/fuzz.sh"
fi
