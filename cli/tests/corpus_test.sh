#!/usr/bin/env bash
# corpus_test.sh SHARDCHECK WORKDIR: the regression-corpus workflow with a mutant as the broken
# kernel and the real strategy as its fix.
#   1. verify the broken kernel with --corpus: it fails, and its shrunk case is appended;
#   2. again: the corpus case is replayed first and fails, nothing new is appended;
#   3. the fixed kernel: the corpus case (and a line without strategy=) replays and passes.
set -u
sc=$1 dir=$2
mkdir -p "$dir"
corpus=$dir/corpus.txt
printf '# cases that ever failed\n' >"$corpus"
run() { mpirun -n 2 --oversubscribe "$sc" verify --cases 20 --quiet --corpus "$corpus" \
          --property forward,backward "$@" 2>&1; }
fail() { echo "corpus_test.sh: $*" >&2; exit 1; }

out=$(run --strategy mutant.ag_reversed@data_parallel); code=$?
printf '%s\n' "$out"
[ $code -eq 1 ] || fail "broken kernel: exit $code, expected 1"
grep -q '^strategy=mutant.ag_reversed@data_parallel ' "$corpus" || fail "no failure appended"
[ "$(grep -c '^strategy=' "$corpus")" -eq 1 ] || fail "expected one corpus line"
echo 'p=2 M=3 N=2 K=2 mode=exact seed=3' >>"$corpus"  # no strategy=: every kernel under test

out=$(run --strategy mutant.ag_reversed@data_parallel); code=$?
printf '%s\n' "$out"
[ $code -eq 1 ] || fail "broken kernel again: exit $code, expected 1"
printf '%s\n' "$out" | grep -Eq '^FAIL mutant.ag_reversed@data_parallel: forward: .* \(corpus line 2\)$' ||
  fail "the corpus case did not fail with its line"
printf '%s\n' "$out" | grep -q '2 cases replayed, 2 failed; 0 new failures appended' ||
  fail "expected both corpus cases replayed and failing, nothing appended"
[ "$(grep -c '^strategy=' "$corpus")" -eq 1 ] || fail "a failure already there was appended again"

out=$(run --strategy data_parallel); code=$?
printf '%s\n' "$out"
[ $code -eq 0 ] || fail "fixed kernel: exit $code, expected 0"
printf '%s\n' "$out" | grep -q '2 cases replayed, 0 failed' || fail "the fix did not replay both"
echo "corpus_test.sh: the corpus case failed until the kernel was fixed"
