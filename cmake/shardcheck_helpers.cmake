# shardcheck_add_mpi_test(NAME name NPROCS n COMMAND exe args... [LABELS l...] [TIMEOUT s])
# Runs `mpiexec -n n exe args` as a ctest entry, as root and oversubscribed where needed.
function(shardcheck_add_mpi_test)
  cmake_parse_arguments(T "" "NAME;NPROCS;TIMEOUT" "COMMAND;LABELS" ${ARGN})
  add_test(NAME ${T_NAME}
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${T_NPROCS} --oversubscribe
                   ${MPIEXEC_PREFLAGS} ${T_COMMAND} ${MPIEXEC_POSTFLAGS})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  set_tests_properties(${T_NAME} PROPERTIES
    LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT} PROCESSORS ${T_NPROCS}
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OPENBLAS_NUM_THREADS=1;OMPI_MCA_rmaps_base_oversubscribe=1;OMPI_MCA_mpi_yield_when_idle=1")
endfunction()
