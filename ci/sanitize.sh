#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer: builds shardcheck with both (gcc, -O1, in its own
# folder, $SHARDCHECK_ROOT/build-sanitize unless SHARDCHECK_SANITIZE_BUILD says), then runs every
# unit test, the `sanitize` negative tests (a write one element past a buffer must be reported)
# and verify at 3 ranks over every strategy. The first report ends the process (halt_on_error,
# -fno-sanitize-recover=all) with exit 66 (ASan, LeakSanitizer) or 67 (UBSan), so no report passes
# as a property failure (1). Open MPI's own leaks are suppressed: ci/lsan.supp.
#   bash ci/sanitize.sh            build and run all of it
#   bash ci/sanitize.sh -R pmpi    ... with these ctest arguments instead of -L 'unit|sanitize'
set -euo pipefail
source "$(dirname "$0")/env.sh"
build=${SHARDCHECK_SANITIZE_BUILD:-$SHARDCHECK_ROOT/build-sanitize}
export ASAN_OPTIONS="halt_on_error=1:exitcode=66:detect_leaks=1:fast_unwind_on_malloc=0"
export LSAN_OPTIONS="suppressions=$SHARDCHECK_ROOT/ci/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:exitcode=67"
bash "$SHARDCHECK_ROOT/ci/setup.sh"
cmake -S "$SHARDCHECK_ROOT" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" -DSHARDCHECK_WERROR=ON -DSHARDCHECK_SANITIZE=ON \
  -DSHARDCHECK_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j "$(nproc)"
# Left out: tests that crash a rank on purpose (UBSan reports the null store before the SIGSEGV
# they expect), preload a fault library (ASan's runtime must be the first library) or time a read
# at 20 s (slower under ASan), or cap the address space (ASan reserves terabytes of it):
# cli.crash_*, cli.mpi_error, cli.endless_stdin, cli.memory_limit_ulimit.
if [ "$#" -eq 0 ]; then
  set -- -L 'unit|sanitize' -E '^cli\.(crash_.*|mpi_error|endless_stdin|memory_limit_ulimit)$'
fi
ctest --test-dir "$build" --output-on-failure --timeout 600 "$@"
echo "ci/sanitize.sh: verify at 3 ranks, every strategy, under ASan + UBSan"
mpirun -n 3 --oversubscribe "$build/cli/shardcheck" verify --cases 100 --seed 3 --quiet
