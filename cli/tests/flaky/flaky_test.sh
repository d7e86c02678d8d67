#!/usr/bin/env bash
# flaky_test.sh MPIEXEC FLAKY_KERNELS OUT: arrival_order (dW summed on rank 0 in message-arrival
# order) at 4 ranks fails `determinism` in some runs of a case only. verify reports it
# intermittent, "reproduced k of 8 re-runs" with k < 8, in its text and in its JSON; shrinks it to
# a small case (p = 3 or 4, M ≤ 16, N ≤ 2, K ≤ 4: on an idle machine arrival order rarely differs below M = 10); and the replay line it prints, which runs the
# case until it fails (--repeat, as many runs as the measured rate asks), reproduces it.
set -u
# How far an intermittent failure shrinks is itself random (a smaller case fails more rarely; on an
# idle machine shrinking stops anywhere from M = 10 to M = 61): the test passes when one of 8 tries
# shrinks it to a small case and checks out.
if [ -z "${FLAKY_TRY:-}" ]; then
  for try in 1 2 3 4 5 6 7 8; do
    if FLAKY_TRY=$try bash "$0" "$@"; then exit 0; fi
    echo "flaky_test.sh: try $try of 8 failed" >&2
  done
  exit 1
fi
mpiexec=$1 flaky=$2 out=$3
fail() { echo "flaky_test.sh: $*" >&2; exit 1; }
mkdir -p "$out"
rm -f "$out/flaky.json"
text=$("$mpiexec" -n 4 --oversubscribe "$flaky" verify --strategy arrival_order --cases 100 \
  --quiet --json "$out/flaky.json" 2>&1)
code=$?
printf '%s\n' "$text"
[ "$code" -eq 1 ] || fail "verify exited $code, expected 1"
printf '%s\n' "$text" | grep -q '^FAIL arrival_order: determinism: ' || fail "no determinism failure"
printf '%s\n' "$text" |
  grep -Eq '^  reproduced [0-7] of 8 re-runs: intermittent \(some runs of the same case pass\)$' ||
  fail "not reported intermittent with its rate"
line=$(printf '%s\n' "$text" | grep '^  replay: ' | sed 's/^  replay: //')
printf '%s\n' "$line" | grep -Eq " --repeat [0-9]+ --replay 'strategy=arrival_order p=[34] M=([1-9]|1[0-6]) N=[12] K=[1-4] " ||
  fail "the replay line does not repeat the case, or the case is not small: $line"
python3 - "$out/flaky.json" <<'PY' || fail "JSON"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["reruns"] == 8, j["reruns"]
f = j["strategies"][0]["failures"][0]
assert f["properties"] == ["determinism"], f["properties"]
assert f["reruns"] == 8 and 0 <= f["reproduced"] < 8 and f["intermittent"] is True, f
assert " --repeat " in f["replay"], f["replay"]
PY
echo "+ $line"
replay=$(eval "$line" 2>&1)
code=$?
printf '%s\n' "$replay"
[ "$code" -eq 1 ] || fail "the replay exited $code, expected 1 (it failed in none of its runs)"
printf '%s\n' "$replay" | grep -Eq '^  reproduced [0-8] of 8 re-runs' || fail "the replay's rate"
