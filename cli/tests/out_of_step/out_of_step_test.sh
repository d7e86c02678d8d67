#!/usr/bin/env bash
# out_of_step_test.sh MPIEXEC RANKS STEP_KERNELS STRATEGY: STRATEGY (a rank with no rows returns
# before dW's all-reduce) fails `runs` at RANKS ranks with "ranks out of step", naming the rank
# that returned and the call the others wait in, shrunk; its replay line reproduces that within
# 10 s.
set -u
mpiexec=$1 ranks=$2 step=$3 strategy=$4
fail() { echo "out_of_step_test.sh: $*" >&2; exit 1; }
start=$(date +%s.%N)
out=$(timeout 300 "$mpiexec" -n "$ranks" --oversubscribe "$step" verify --strategy "$strategy" \
  --p "$ranks" --cases 50 --quiet 2>&1)
code=$?
printf '%s\n' "$out"
echo "out_of_step_test.sh: verify took $(awk "BEGIN { print $(date +%s.%N) - $start }") s"
[ "$code" -eq 1 ] || fail "verify exited $code, expected 1 (a property failed)"
# The message, in any order of its parts: the rank that returned, the call the others wait in,
# and the rank out of step.
named() {
  local line
  line=$(printf '%s\n' "$1" | grep -m1 'runs: ranks out of step: ') || return 1
  printf '%s\n' "$line" | grep -Eq 'ranks? [0-9, ]+ returned from backward after 0 calls' &&
    printf '%s\n' "$line" |
    grep -Eq 'ranks? [0-9, ]+ waits? in all_reduce #0 on axis 0 \([0-9]+ × [48] B\) in backward after 0 calls' &&
    printf '%s\n' "$line" | grep -Eq '; out of step: ranks? [0-9, ]+$'
}
named "$out" || fail "no out-of-step message naming the rank and the call"
replay=$(printf '%s\n' "$out" | grep -m1 '^ *replay: ' | sed 's/^ *replay: //')
[ -n "$replay" ] || fail "no replay line"
printf '%s\n' "$replay" | grep -Eq "p=[2-4] M=[0-3] " || fail "not shrunk: $replay"
echo "+ $replay"
start=$(date +%s.%N)
out=$(eval "timeout 10 $replay" 2>&1)
code=$?
printf '%s\n' "$out"
[ "$code" -eq 1 ] || fail "the replay exited $code within 10 s, expected 1"
named "$out" || fail "the replay does not name the rank and the call"
echo "out_of_step_test.sh: the replay took $(awk "BEGIN { print $(date +%s.%N) - $start }") s"
