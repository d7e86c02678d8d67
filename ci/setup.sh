#!/usr/bin/env bash
# Installs the Debian 12 packages shardcheck needs, only those that are missing. Run as root.
set -euo pipefail
packages=(g++ cmake make pkg-config libopenmpi-dev openmpi-bin libopenblas-dev librapidcheck-dev
          libgtest-dev libbenchmark-dev libscalapack-openmpi-dev libcli11-dev nlohmann-json3-dev
          libpugixml-dev clang-format git python3-junitparser python3-numpy gnuplot-nox clang
          libclang-rt-14-dev)
# MPICH beside Open MPI (ci/mpich.sh); Open MPI stays the system's default MPI.
packages+=(libmpich-dev mpich)
# PETSc's MATMPIDENSE products as an outside kernel (examples/petsc, ci/petsc_kernel.sh).
packages+=(petsc-dev)
# Global Arrays' GA_Dgemm as an outside kernel (examples/global_arrays, ci/global_arrays_kernel.sh):
# Debian's GA 5.8.2 is built on ARMCI-MPI, whose library is a package of its own.
packages+=(libglobalarrays-dev libarmci-mpi-dev)
# Eigen's bfloat16 and half: the bf16 / f16 storage dtypes (reference/mixed.hpp).
packages+=(libeigen3-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "ci/setup.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
