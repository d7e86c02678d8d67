# CMake functions for shardcheck's own tests and for a kernel's check program (installed with the
# package: find_package(shardcheck) brings them).
# Global, so that the functions work from any folder of the calling project.
set_property(GLOBAL PROPERTY shardcheck_helpers_dir ${CMAKE_CURRENT_LIST_DIR})

# The environment of every MPI test: Open MPI as root, oversubscribed ranks that yield their core
# when idle, one OpenBLAS thread per rank.
macro(_shardcheck_test_environment out)
  set(${out} "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OPENBLAS_NUM_THREADS=1;OMPI_MCA_rmaps_base_oversubscribe=1;OMPI_MCA_mpi_yield_when_idle=1")
endmacro()

# The launcher's flag for more ranks than cores: Open MPI's mpiexec refuses them without
# --oversubscribe; MPICH's hydra takes them as they are and knows no such flag.
set(_shardcheck_oversubscribe "")
if(MPIEXEC_EXECUTABLE)
  execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE _shardcheck_mpiexec
                  ERROR_QUIET)
  if(_shardcheck_mpiexec MATCHES "Open ?MPI|OpenRTE")
    set(_shardcheck_oversubscribe --oversubscribe)
  endif()
endif()
set_property(GLOBAL PROPERTY shardcheck_oversubscribe "${_shardcheck_oversubscribe}")

# shardcheck_add_mpi_test(NAME name NPROCS n COMMAND exe args... [LABELS l...] [TIMEOUT s])
# Runs `mpiexec -n n exe args` as a ctest entry, as root and oversubscribed where needed.
function(shardcheck_add_mpi_test)
  cmake_parse_arguments(T "" "NAME;NPROCS;TIMEOUT" "COMMAND;LABELS" ${ARGN})
  get_property(oversubscribe GLOBAL PROPERTY shardcheck_oversubscribe)
  add_test(NAME ${T_NAME}
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${T_NPROCS} ${oversubscribe}
                   ${MPIEXEC_PREFLAGS} ${T_COMMAND} ${MPIEXEC_POSTFLAGS})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  _shardcheck_test_environment(environment)
  set_tests_properties(${T_NAME} PROPERTIES
    LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT} PROCESSORS ${T_NPROCS}
    ENVIRONMENT "${environment}")
endfunction()

# shardcheck_add_kernel_test(NAME name TARGET check_program RANKS 1 2 4 [CASES 200] [SEED s]
#                            [STRATEGIES k...] [PROPERTIES p...] [CORPUS file] [LABELS l...]
#                            [ARGS more verify arguments...] [EXPECT_FAIL regex]
#                            [EXPECT_CODE code] [TIMEOUT s])
# One ctest entry per rank count, `name.ranks<n>`, running
#   mpiexec -n <n> --oversubscribe <check_program> verify --cases 200 --seed <s or n>
#           [--strategy k]... [--property p,...] [--corpus file] [ARGS...]
# e.g. RANKS 1 2 gives my_kernel.ranks1 and my_kernel.ranks2. A relative CORPUS is taken from the
# calling CMakeLists' folder. With EXPECT_FAIL the entry is a negative test: it passes only when
# verify exits 1 (a property failed) and its output matches the regex, e.g.
# EXPECT_FAIL "FAIL my_broken_kernel: ledger". EXPECT_CODE changes the exit code it expects, e.g.
# 7 for a mutant cell that no property caught (EXPECT_FAIL "mutant never acted").
function(shardcheck_add_kernel_test)
  cmake_parse_arguments(T "" "NAME;TARGET;CASES;SEED;CORPUS;EXPECT_FAIL;EXPECT_CODE;TIMEOUT"
                        "RANKS;STRATEGIES;PROPERTIES;LABELS;ARGS" ${ARGN})
  foreach(required NAME TARGET RANKS)
    if(NOT T_${required})
      message(FATAL_ERROR "shardcheck_add_kernel_test: ${required} is required")
    endif()
  endforeach()
  if(T_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "shardcheck_add_kernel_test: unknown arguments ${T_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT T_CASES)
    set(T_CASES 200)
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  set(verify verify --cases ${T_CASES})
  foreach(s IN LISTS T_STRATEGIES)
    list(APPEND verify --strategy ${s})
  endforeach()
  if(T_PROPERTIES)
    list(JOIN T_PROPERTIES "," properties)
    list(APPEND verify --property ${properties})
  endif()
  if(T_CORPUS)
    cmake_path(ABSOLUTE_PATH T_CORPUS BASE_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
    list(APPEND verify --corpus ${T_CORPUS})
  endif()
  get_property(helpers_dir GLOBAL PROPERTY shardcheck_helpers_dir)
  get_property(oversubscribe GLOBAL PROPERTY shardcheck_oversubscribe)
  _shardcheck_test_environment(environment)
  foreach(n IN LISTS T_RANKS)
    set(seed ${n})
    if(T_SEED)
      set(seed ${T_SEED})
    endif()
    set(command ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${n} ${oversubscribe}
                ${MPIEXEC_PREFLAGS} $<TARGET_FILE:${T_TARGET}> ${verify} --seed ${seed} ${T_ARGS}
                ${MPIEXEC_POSTFLAGS})
    if(DEFINED T_EXPECT_FAIL)
      if(NOT DEFINED T_EXPECT_CODE)
        set(T_EXPECT_CODE 1)
      endif()
      set(command ${CMAKE_COMMAND} -DEXPECT_CODE=${T_EXPECT_CODE} "-DEXPECT_REGEX=${T_EXPECT_FAIL}"
                  -P ${helpers_dir}/shardcheck_expect.cmake -- ${command})
    endif()
    add_test(NAME ${T_NAME}.ranks${n} COMMAND ${command})
    set_tests_properties(${T_NAME}.ranks${n} PROPERTIES
      LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT} PROCESSORS ${n}
      ENVIRONMENT "${environment}")
  endforeach()
endfunction()
