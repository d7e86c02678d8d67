#!/usr/bin/env bash
# The README's main job: builds the shardcheck program if needed, then runs `shardcheck verify`
# at 4 ranks over every registered strategy on the default configuration. Extra arguments go to
# `shardcheck verify`. Only what the job runs is built: a build folder this script configures has
# no tests, benchmarks or examples, and only the `shardcheck` target is built (in a folder
# ci/build.sh configured, the same target alone).
set -euo pipefail
source "$(dirname "$0")/env.sh"
bash "$SHARDCHECK_ROOT/ci/setup.sh"
if [ ! -f "$SHARDCHECK_BUILD/CMakeCache.txt" ]; then
  cmake -S "$SHARDCHECK_ROOT" -B "$SHARDCHECK_BUILD" -DCMAKE_BUILD_TYPE=Release \
    -DSHARDCHECK_WERROR=ON -DSHARDCHECK_BUILD_TESTS=OFF -DSHARDCHECK_BUILD_BENCH=OFF >/dev/null
fi
cmake --build "$SHARDCHECK_BUILD" -j "$(nproc)" --target shardcheck >/dev/null
exec mpirun -n 4 --oversubscribe "$SHARDCHECK_BUILD/cli/shardcheck" verify "$@"
