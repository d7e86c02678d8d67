#!/usr/bin/env bash
# The README's test command: the format check, the build, then every test (unit, property at 1-4 ranks, mutant).
# Extra arguments go to ctest, e.g. `bash ci/test.sh -L mutant`.
set -euo pipefail
source "$(dirname "$0")/env.sh"
bash "$SHARDCHECK_ROOT/ci/setup.sh"
bash "$SHARDCHECK_ROOT/ci/format.sh"
bash "$SHARDCHECK_ROOT/ci/build.sh"
cd "$SHARDCHECK_BUILD"
ctest --output-on-failure --timeout 900 "$@"
