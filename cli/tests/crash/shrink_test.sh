#!/usr/bin/env bash
# shrink_test.sh MPIEXEC CRASH_KERNELS: crash_empty_shard (a rank whose share of X's rows is empty
# writes through a null pointer) at 4 ranks crashes on a generated case (exit 5); the crash
# message's `shrink:` line, run as printed, shrinks it in fresh jobs to a case of p ≤ 2 and
# M, N, K ≤ 2 that still crashes, and prints its replay line, which crashes too.
set -u
mpiexec=$1 crash=$2
fail() { echo "shrink_test.sh: $*" >&2; exit 1; }
out=$("$mpiexec" -n 4 --oversubscribe "$crash" verify --strategy crash_empty_shard --p 4 \
  --cases 50 --quiet 2>&1)
code=$?
printf '%s\n' "$out"
[ "$code" -eq 5 ] || fail "verify exited $code, expected 5 (a crash)"
shrink=$(printf '%s\n' "$out" | grep -m1 '^shrink: ' | sed 's/^shrink: //')
[ -n "$shrink" ] || fail "the crash message suggests no shrink command"
echo "+ $shrink"
out=$(eval "$shrink" 2>&1)
code=$?
printf '%s\n' "$out"
[ "$code" -eq 0 ] || fail "shrink exited $code, expected 0"
line=$(printf '%s\n' "$out" | grep '^case: ' | sed 's/^case: //')
[ -n "$line" ] || fail "shrink printed no case"
printf '%s\n' "$line" | grep -Eq '^strategy=crash_empty_shard p=[12] M=[0-2] N=[0-2] K=[0-2] ' ||
  fail "the smallest case is not p ≤ 2 with M, N, K ≤ 2: $line"
printf '%s\n' "$out" | grep -q '^smallest case whose job ends with exit 5 (a rank crashed)' ||
  fail "no summary line"
replay=$(printf '%s\n' "$out" | grep '^replay: ' | sed 's/^replay: //')
echo "+ $replay"
out=$(eval "$replay" 2>&1)
code=$?
printf '%s\n' "$out"
[ "$code" -eq 5 ] || fail "the smallest case's replay exited $code, expected 5"
echo "shrink_test.sh: shrunk to $line"
