#!/usr/bin/env bash
# PETSc's MATMPIDENSE products as an outside kernel (examples/petsc), built as a new user builds it:
# installs shardcheck from the build to a temporary prefix, copies the example out of the tree,
# configures it against the prefix alone, builds it with warnings as errors and runs its ctest
# (label petsc), then checks the `build-petsc$` blocks of docs/*.md against it. Without PETSc
# (Debian's petsc-dev) the example builds nothing and this says so.
# Extra arguments go to that ctest.
set -euo pipefail
source "$(dirname "$0")/env.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$SHARDCHECK_BUILD" --prefix "$work/prefix" >/dev/null
cp -r "$SHARDCHECK_ROOT/examples/petsc" "$work/src"
cmake -S "$work/src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_CXX_FLAGS="-Wall -Wextra -Wpedantic -Werror" |
  grep -i "petsc" || true
cmake --build "$work/build" -j "$(nproc)"
ctest --test-dir "$work/build" --output-on-failure -L petsc "$@"
# The `build-petsc$` blocks of docs/*.md are this build's output.
if [ "$#" -eq 0 ] && [ -x "$work/build/petsc_check" ]; then
  /usr/bin/python3 "$SHARDCHECK_ROOT/ci/readme_outputs.py" --check \
    --in build-petsc="$work/build" --only build-petsc \
    --shardcheck "$SHARDCHECK_BUILD/cli/shardcheck"
fi
