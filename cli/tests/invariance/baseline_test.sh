#!/usr/bin/env bash
# verify --baseline across two versions of one kernel (invariant_kernels.cpp's fixed_order; its
# version 2 sums dW per rank first): the first run records, the same version again finds nothing,
# version 2 drifts (bits changed, every bound held) as a warning, and as a failure (exit 1) with
# --baseline-fail drift; the JSON and JUnit files carry it.
#   baseline_test.sh MPIEXEC KERNELS OUT
set -euo pipefail
mpiexec=$1 kernels=$2 out=$3
rm -rf "$out"
mkdir -p "$out"
fail() {
  echo "baseline_test.sh: $*" >&2
  exit 1
}
run() {
  "$mpiexec" -n 4 --oversubscribe "$kernels" verify --strategy fixed_order --cases 40 --quiet \
    --property forward,backward,determinism,replicas --baseline "$out/base.json" "$@"
}
expect() {  # expect STATUS FILE PATTERN…
  local status=$1 file=$2
  shift 2
  for pattern in "$@"; do
    grep -Eq "$pattern" "$file" || { cat "$file"; fail "$file lacks /$pattern/"; }
  done
}
set +e
run >"$out/first.txt" 2>&1
[ $? -eq 0 ] || { cat "$out/first.txt"; fail "the recording run failed"; }
run >"$out/again.txt" 2>&1
[ $? -eq 0 ] || { cat "$out/again.txt"; fail "the same version failed"; }
INVARIANT_KERNELS_VERSION=2 run --json "$out/v2.json" >"$out/v2.txt" 2>&1
[ $? -eq 0 ] || { cat "$out/v2.txt"; fail "version 2 exited non-zero with drift a warning"; }
INVARIANT_KERNELS_VERSION=2 run --baseline-fail drift --junit "$out/v2.xml" >"$out/v2_fail.txt" 2>&1
status=$?
set -e
[ "$status" -eq 1 ] || { cat "$out/v2_fail.txt"; fail "version 2 with --baseline-fail drift exited $status, not 1"; }
expect 0 "$out/first.txt" "^baseline .*: 0 cases compared, 40 recorded; 0 drifted"
expect 0 "$out/again.txt" "^baseline .*: 40 cases compared, 0 new .*; 0 drifted .* 0 grew past 2"
expect 0 "$out/v2.txt" "^baseline .*: 40 cases compared, 0 new .*; [1-9][0-9]* drifted \(bits changed, every bound held\)" \
  "^  drift \(warning\): dW 0x[0-9a-f]{16} was 0x[0-9a-f]{16}: strategy=fixed_order p=[2-4] " "^1 passed, 0 failed"
expect 1 "$out/v2_fail.txt" "^  drift \(failure\): dW " "^1 passed, 0 failed"
/usr/bin/python3 - "$out/v2.json" "$out/v2.xml" <<'PY'
import json, sys
import xml.etree.ElementTree as ET
b = json.load(open(sys.argv[1]))["baseline"]
assert b["compared"] == 40 and b["failing_lanes"] == [], b
# Version 2 may grow a share too (a case whose dW was exact): a warning as well.
assert any(c["lane"] == "drift" for c in b["changes"]), b
assert not any(c["failure"] for c in b["changes"]), b
suite = [s for s in ET.parse(sys.argv[2]).getroot() if s.get("name") == "baseline"][0]
drift = [t for t in suite if t.get("name") == "drift"][0]
assert drift.find("failure") is not None and suite.get("failures") == "1", ET.tostring(suite)
drifted = sum(c["lane"] == "drift" for c in b["changes"])
print(f"baseline: {drifted} of 40 cases drifted under version 2")
PY
