# SUMMA against ScaLAPACK's PDGEMM on the same shapes and grid, in its own target.
# Included from bench/CMakeLists.txt: include(${CMAKE_CURRENT_LIST_DIR}/summa.cmake)
# Run: mpirun -n 2 build/bench/shardcheck_bench_summa
# ScaLAPACK for Open MPI is Debian's libscalapack-openmpi-dev. Its CMake package
# (/usr/lib/cmake/scalapack-2.2.1.openmpi) points its imported target at
# /usr/lib/libscalapack-openmpi.so.2.2.1, which Debian installs under the multiarch directory
# instead, so find_package(scalapack) fails; the library is found by name. Without it the
# benchmark is skipped.
find_library(SHARDCHECK_SCALAPACK_LIBRARY NAMES scalapack-openmpi scalapack)
if(SHARDCHECK_SCALAPACK_LIBRARY)
  add_executable(shardcheck_bench_summa ${CMAKE_CURRENT_LIST_DIR}/summa.cpp)
  target_include_directories(shardcheck_bench_summa PRIVATE ${PROJECT_SOURCE_DIR}/parallel/src)
  target_link_libraries(shardcheck_bench_summa PRIVATE shardcheck::properties shardcheck::new_hook
                        shardcheck::pmpi
                        benchmark::benchmark ${SHARDCHECK_SCALAPACK_LIBRARY} shardcheck_warnings)
else()
  message(STATUS "ScaLAPACK (libscalapack-openmpi) not found: shardcheck_bench_summa is not built")
endif()
