#!/usr/bin/env bash
# The outside kernel as a new user builds it: installs shardcheck from the build to a temporary
# prefix, copies examples/outside_kernel out of the tree, configures it against the prefix alone
# (find_package(shardcheck); no path into shardcheck's source or build tree), builds it with
# warnings as errors and runs its ctest (label example). Extra arguments go to that ctest.
set -euo pipefail
exec bash "$(dirname "$0")/example.sh" outside_kernel example build-outside raw_check "$@"
