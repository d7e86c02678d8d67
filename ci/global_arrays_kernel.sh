#!/usr/bin/env bash
# Global Arrays' GA_Dgemm/GA_Sgemm as an outside kernel (examples/global_arrays), built as a new
# user builds it: installs shardcheck from the build to a temporary prefix, copies the example out
# of the tree, configures it against the prefix alone, builds it with warnings as errors and runs
# its ctest (label global_arrays): the gate at 1–4 ranks, the negative tests of its memory claim
# and the expected failures of GA 5.8.2, then checks the docs' `build-ga$` blocks against that
# build.
# Without Debian's libglobalarrays-dev and libarmci-mpi-dev the example builds nothing and this
# says so. Extra arguments go to that ctest.
set -euo pipefail
source "$(dirname "$0")/env.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$SHARDCHECK_BUILD" --prefix "$work/prefix" >/dev/null
cp -r "$SHARDCHECK_ROOT/examples/global_arrays" "$work/src"
cmake -S "$work/src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_CXX_FLAGS="-Wall -Wextra -Wpedantic -Werror" |
  grep -i "global arrays" || true
cmake --build "$work/build" -j "$(nproc)"
ctest --test-dir "$work/build" --output-on-failure -L global_arrays "$@"
# The `build-ga$` blocks of docs/*.md are this build's output.
if [ "$#" -eq 0 ] && [ -x "$work/build/ga_check" ]; then
  /usr/bin/python3 "$SHARDCHECK_ROOT/ci/readme_outputs.py" --check \
    --in build-ga="$work/build" --only build-ga \
    --shardcheck "$SHARDCHECK_BUILD/cli/shardcheck"
fi
