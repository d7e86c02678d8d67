#!/usr/bin/env bash
# An example kernel of examples/ as a new user builds it: installs shardcheck from the build to a
# temporary prefix, copies examples/DIR out of the tree, configures it against the prefix alone
# (find_package(shardcheck); no path into shardcheck's source or build tree), builds it with
# warnings as errors and runs its ctest (label LABEL), then checks the `TAG$` blocks of README.md
# and docs/*.md against that build (examples/ beside it, as in the tree). An example whose library
# is not installed builds nothing and says so ("… not found: the … example is not built"); its
# checks are then skipped. Extra arguments go to that ctest and skip the docs check.
#   bash ci/example.sh DIR LABEL TAG PROGRAM [ctest arguments]
#   bash ci/example.sh DIR LABEL TAG PROGRAM --build-only     installs, configures, builds, stops
# The work folder is temporary, or $SHARDCHECK_EXAMPLES_WORK/DIR when that is set (kept: a
# second run there after --build-only rebuilds nothing).
# ci/outside_kernel.sh, ci/scalapack_kernel.sh, ci/petsc_kernel.sh and
# ci/global_arrays_kernel.sh call it for their examples.
set -euo pipefail
source "$(dirname "$0")/env.sh"
dir=$1 label=$2 tag=$3 program=$4
shift 4
build_only=false
if [ "${1:-}" = --build-only ]; then build_only=true; shift; fi
if [ -n "${SHARDCHECK_EXAMPLES_WORK:-}" ]; then
  work=$SHARDCHECK_EXAMPLES_WORK/$dir
  mkdir -p "$work"
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
cmake --install "$SHARDCHECK_BUILD" --prefix "$work/prefix" >/dev/null
rm -rf "$work/src" "$work/examples"
cp -a "$SHARDCHECK_ROOT/examples/$dir" "$work/src"  # its times kept: a second run rebuilds nothing
ln -s "$SHARDCHECK_ROOT/examples" "$work/examples"
cmake -S "$work/src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_CXX_FLAGS="-Wall -Wextra -Wpedantic -Werror" |
  grep "not built" || true
cmake --build "$work/build" -j "$(nproc)"
if [ ! -x "$work/build/$program" ]; then
  echo "ci/example.sh: examples/$dir built no $program: its library is not installed" >&2
  exit 0
fi
if $build_only; then exit 0; fi
ctest --test-dir "$work/build" --output-on-failure -L "$label" "$@"
if [ "$#" -eq 0 ]; then
  /usr/bin/python3 "$SHARDCHECK_ROOT/ci/readme_outputs.py" --check --in "$tag=$work/build" \
    --only "$tag" --shardcheck "$SHARDCHECK_BUILD/cli/shardcheck"
fi
