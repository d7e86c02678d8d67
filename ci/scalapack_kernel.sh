#!/usr/bin/env bash
# ScaLAPACK's PDGEMM/PSGEMM as an outside kernel (examples/scalapack), built as a new user builds
# it: installs shardcheck from the build to a temporary prefix, copies the example out of the tree,
# configures it against the prefix alone, builds it with warnings as errors and runs its ctest
# (label scalapack). Without Debian's libscalapack-openmpi-dev the example builds nothing and this
# says so. Extra arguments go to that ctest.
set -euo pipefail
source "$(dirname "$0")/env.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$SHARDCHECK_BUILD" --prefix "$work/prefix" >/dev/null
cp -r "$SHARDCHECK_ROOT/examples/scalapack" "$work/src"
cmake -S "$work/src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_CXX_FLAGS="-Wall -Wextra -Wpedantic -Werror" |
  grep -i "scalapack" || true
cmake --build "$work/build" -j "$(nproc)"
ctest --test-dir "$work/build" --output-on-failure -L scalapack "$@"
# The `build-scalapack$` blocks of docs/*.md are this build's output.
if [ "$#" -eq 0 ] && [ -x "$work/build/pblas_check" ]; then
  /usr/bin/python3 "$SHARDCHECK_ROOT/ci/readme_outputs.py" --check \
    --in build-scalapack="$work/build" --only build-scalapack \
    --shardcheck "$SHARDCHECK_BUILD/cli/shardcheck"
fi
