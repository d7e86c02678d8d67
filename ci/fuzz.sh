#!/usr/bin/env bash
# libFuzzer on shardcheck's input parsers: builds the fuzz/ targets with clang
# (-fsanitize=fuzzer,address,undefined; folder $SHARDCHECK_ROOT/build-fuzz unless
# SHARDCHECK_FUZZ_BUILD says) and runs each for FUZZ_SECONDS (default 15; four targets, about a
# minute) from its committed seeds, fuzz/corpus/<target>/ (read only: new inputs go to a temporary
# folder). Fails on any crash, sanitizer report, escaped exception, broken invariant or input
# slower than 30 s (a hang: the slowest seen, summa at p = 812945 under the sanitizers on a loaded
# machine, took 10 s; 0.5 s in a release build); the input is kept as
# $build/artifacts/<target>-crash-<sha1>. Reproduce with
#   build-fuzz/fuzz/fuzz_<target> build-fuzz/artifacts/<target>-crash-<sha1>
#   bash ci/fuzz.sh partition      only the targets named
#   bash ci/fuzz.sh --build-only   builds the targets and stops
# The targets run as many at a time as there are cores, each on a core of its own for its
# FUZZ_SECONDS.
set -euo pipefail
source "$(dirname "$0")/env.sh"
build=${SHARDCHECK_FUZZ_BUILD:-$SHARDCHECK_ROOT/build-fuzz}
seconds=${FUZZ_SECONDS:-15}
build_only=false
if [ "${1:-}" = --build-only ]; then build_only=true; shift; fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then targets=(replay_line partition param layout); fi
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
CC=clang CXX=clang++ cmake -S "$SHARDCHECK_ROOT" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" -DSHARDCHECK_WERROR=ON \
  -DSHARDCHECK_FUZZ=ON -DSHARDCHECK_BUILD_TESTS=OFF -DSHARDCHECK_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" --target "${targets[@]/#/fuzz_}"
if $build_only; then exit 0; fi
mkdir -p "$build/artifacts"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fuzz() {
  local t=$1
  mkdir -p "$work/$t"
  echo "ci/fuzz.sh: fuzz_$t for ${seconds} s from fuzz/corpus/$t"
  if ! "$build/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$build/artifacts/$t-" "$work/$t" \
      "$SHARDCHECK_ROOT/fuzz/corpus/$t" >"$work/$t.log" 2>&1; then
    tail -n 60 "$work/$t.log"
    echo "ci/fuzz.sh: fuzz_$t found a failing input (kept in $build/artifacts/)" >&2
    touch "$work/$t.failed"
  fi
}
# One target per core; each reports in the order given once all have ended.
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n || true; done
  fuzz "$t" &
done
wait
failed=0
for t in "${targets[@]}"; do
  if [ -e "$work/$t.failed" ]; then failed=1; continue; fi
  echo "ci/fuzz.sh: fuzz_$t:"
  grep -E "^Done|stat::(number_of_executed_units|new_units_added)" "$work/$t.log"
done
exit $failed
