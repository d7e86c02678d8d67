#!/usr/bin/env bash
# Installs what is missing, configures and builds shardcheck (warnings are errors here).
set -euo pipefail
source "$(dirname "$0")/env.sh"
bash "$SHARDCHECK_ROOT/ci/setup.sh"
cmake -S "$SHARDCHECK_ROOT" -B "$SHARDCHECK_BUILD" -DCMAKE_BUILD_TYPE=Release -DSHARDCHECK_WERROR=ON "$@"
cmake --build "$SHARDCHECK_BUILD" -j "$(nproc)"
