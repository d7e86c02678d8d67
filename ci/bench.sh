#!/usr/bin/env bash
# bench.sh [benchmark args...]: builds shardcheck_bench (Release, warnings as errors) in
# build-bench/ and runs it at 2 ranks, one OpenBLAS thread per rank, each rank bound to a core.
# Extra arguments go to the benchmark, e.g. --benchmark_format=json --benchmark_out=bench.json.
# BUILD_DIR and NP override the build directory and the rank count.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build-bench}
np=${NP:-2}
cmake -S "$root" -B "$build" -DSHARDCHECK_WERROR=ON -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j2 --target shardcheck_bench >/dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
exec mpirun -n "$np" --bind-to core "$build/bench/shardcheck_bench" "$@"
