#!/usr/bin/env bash
# The outside kernel as a new user builds it: installs shardcheck from the build to a temporary
# prefix, copies examples/outside_kernel out of the tree, configures it against the prefix alone
# (find_package(shardcheck); no path into shardcheck's source or build tree), builds it with
# warnings as errors and runs its ctest (label example). Extra arguments go to that ctest.
set -euo pipefail
source "$(dirname "$0")/env.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$SHARDCHECK_BUILD" --prefix "$work/prefix" >/dev/null
cp -r "$SHARDCHECK_ROOT/examples/outside_kernel" "$work/src"
cmake -S "$work/src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_CXX_FLAGS="-Wall -Wextra -Wpedantic -Werror" >/dev/null
cmake --build "$work/build" -j "$(nproc)"
ctest --test-dir "$work/build" --output-on-failure -L example "$@"
# The `build-outside$` blocks of docs/*.md are this build's output (../examples as from the tree).
if [ "$#" -eq 0 ]; then
  ln -s "$SHARDCHECK_ROOT/examples" "$work/examples"
  /usr/bin/python3 "$SHARDCHECK_ROOT/ci/readme_outputs.py" --check --in build-outside="$work/build" \
    --only build-outside --shardcheck "$SHARDCHECK_BUILD/cli/shardcheck"
fi
