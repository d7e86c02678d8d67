# Sourced by the ci scripts: Open MPI as root, one OpenBLAS thread per rank, the build folder.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
# Idle ranks yield the core: tests share 2 cores between up to 4 ranks (and whatever else runs).
export OMPI_MCA_mpi_yield_when_idle=1
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
SHARDCHECK_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SHARDCHECK_BUILD=${SHARDCHECK_BUILD:-$SHARDCHECK_ROOT/build}
export SHARDCHECK_ROOT SHARDCHECK_BUILD
