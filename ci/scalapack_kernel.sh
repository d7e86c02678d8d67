#!/usr/bin/env bash
# ScaLAPACK's PDGEMM/PSGEMM as an outside kernel (examples/scalapack), built as a new user builds
# it: installs shardcheck from the build to a temporary prefix, copies the example out of the tree,
# configures it against the prefix alone, builds it with warnings as errors and runs its ctest
# (label scalapack). Without Debian's libscalapack-openmpi-dev the example builds nothing and this
# says so. Extra arguments go to that ctest.
set -euo pipefail
exec bash "$(dirname "$0")/example.sh" scalapack scalapack build-scalapack pblas_check "$@"
