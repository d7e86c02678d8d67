#!/usr/bin/env bash
# Installs what is missing, configures and builds shardcheck with its tests, benchmarks and
# examples (warnings are errors here). The options are given, not left to the cache, so that a
# build folder ci/verify.sh configured without them gets them here. Extra arguments go to cmake's
# configure step.
set -euo pipefail
source "$(dirname "$0")/env.sh"
bash "$SHARDCHECK_ROOT/ci/setup.sh"
cmake -S "$SHARDCHECK_ROOT" -B "$SHARDCHECK_BUILD" -DCMAKE_BUILD_TYPE=Release -DSHARDCHECK_WERROR=ON \
  -DSHARDCHECK_BUILD_TESTS=ON -DSHARDCHECK_BUILD_BENCH=ON "$@"
cmake --build "$SHARDCHECK_BUILD" -j "$(nproc)"
