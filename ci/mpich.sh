#!/usr/bin/env bash
# shardcheck against MPICH (Debian's libmpich-dev, the ABI of Cray MPICH, Intel MPI and MVAPICH)
# beside the default Open MPI: a second tree configured with MPICH's compiler wrappers and
# launcher (tests and benchmarks off), `verify` of every strategy under MPICH's mpiexec at 2 and 4
# ranks, then the raw-MPI outside kernel (examples/outside_kernel) built against that tree's
# installed package and run through its ctest (label example). Called by ci/test.sh. The
# system's default MPI is left as it is. SHARDCHECK_MPICH_BUILD names the tree (default:
# <build>-mpich). `ci/mpich.sh --build-only` builds the tree and stops.
set -euo pipefail
source "$(dirname "$0")/env.sh"
build=${SHARDCHECK_MPICH_BUILD:-$SHARDCHECK_BUILD-mpich}
mpich=(-DMPI_C_COMPILER=/usr/bin/mpicc.mpich -DMPI_CXX_COMPILER=/usr/bin/mpicxx.mpich
       -DMPIEXEC_EXECUTABLE=/usr/bin/mpiexec.mpich)
cmake -S "$SHARDCHECK_ROOT" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSHARDCHECK_WERROR=ON \
  -DSHARDCHECK_BUILD_TESTS=OFF -DSHARDCHECK_BUILD_BENCH=OFF "${mpich[@]}" >/dev/null
cmake --build "$build" -j "$(nproc)"
if [ "${1:-}" = --build-only ]; then exit 0; fi
if ! ldd "$build/cli/shardcheck" | grep libmpich >/dev/null; then
  echo "ci/mpich.sh: $build/cli/shardcheck is not linked against MPICH" >&2
  exit 1
fi
# Every strategy, every property. MPICH's ranks poll while they wait: more ranks than cores run
# slower than under Open MPI, hence fewer cases at 4 ranks.
/usr/bin/mpiexec.mpich -n 2 "$build/cli/shardcheck" verify --cases 100 --seed 2
/usr/bin/mpiexec.mpich -n 4 "$build/cli/shardcheck" verify --cases 10 --seed 4

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cp -r "$SHARDCHECK_ROOT/examples/outside_kernel" "$work/src"
cmake -S "$work/src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release "${mpich[@]}" \
  -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_CXX_FLAGS="-Wall -Wextra -Wpedantic -Werror" >/dev/null
cmake --build "$work/build" -j "$(nproc)"
# Its 200-case runs at 3 and 4 ranks are left to the Open MPI tree (about two minutes each under
# MPICH on two cores); 4 ranks are covered above and by its negative tests.
ctest --test-dir "$work/build" --output-on-failure -L example -E 'raw_data_parallel[.]ranks[34]$' "$@"
