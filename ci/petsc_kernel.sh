#!/usr/bin/env bash
# PETSc's MATMPIDENSE products as an outside kernel (examples/petsc), built as a new user builds it:
# installs shardcheck from the build to a temporary prefix, copies the example out of the tree,
# configures it against the prefix alone, builds it with warnings as errors and runs its ctest
# (label petsc), then checks the `build-petsc$` blocks of docs/*.md against it. Without PETSc
# (Debian's petsc-dev) the example builds nothing and this says so.
# Extra arguments go to that ctest.
set -euo pipefail
exec bash "$(dirname "$0")/example.sh" petsc petsc build-petsc petsc_check "$@"
