#!/usr/bin/env bash
# Global Arrays' GA_Dgemm/GA_Sgemm as an outside kernel (examples/global_arrays), built as a new
# user builds it: installs shardcheck from the build to a temporary prefix, copies the example out
# of the tree, configures it against the prefix alone, builds it with warnings as errors and runs
# its ctest (label global_arrays): the gate at 1–4 ranks, the negative tests of its memory and
# ledger claims and the expected failures of GA 5.8.2, then checks the docs' `build-ga$` blocks
# against that build.
# Without Debian's libglobalarrays-dev and libarmci-mpi-dev the example builds nothing and this
# says so. Extra arguments go to that ctest.
set -euo pipefail
exec bash "$(dirname "$0")/example.sh" global_arrays global_arrays build-ga ga_check "$@"
