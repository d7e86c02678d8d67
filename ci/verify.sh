#!/usr/bin/env bash
# The README's main job: build if needed, then `shardcheck verify` at 4 ranks over every
# registered strategy on the default configuration. Extra arguments go to `shardcheck verify`.
set -euo pipefail
source "$(dirname "$0")/env.sh"
[ -x "$SHARDCHECK_BUILD/cli/shardcheck" ] || bash "$SHARDCHECK_ROOT/ci/build.sh"
cmake --build "$SHARDCHECK_BUILD" -j "$(nproc)" --target shardcheck >/dev/null
exec mpirun -n 4 --oversubscribe "$SHARDCHECK_BUILD/cli/shardcheck" verify "$@"
