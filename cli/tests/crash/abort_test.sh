#!/usr/bin/env bash
# abort_test.sh RANK ABORTED_CASE_IN_FILES PREFIX -- COMMAND...: COMMAND (a verify whose kernel
# calls MPI_Abort(comm, 1) on world rank RANK, after data_parallel has finished) exits 6, says
# which rank aborted with which code and prints the replay line; PREFIX.json and PREFIX.xml are
# valid, complete: false, with data_parallel's result, and (ABORTED_CASE_IN_FILES = yes) the
# aborted case as a failure of source "aborted".
set -u
rank=$1 aborted=$2 prefix=$3
shift 4
rm -f "$prefix.json" "$prefix.xml"
out=$("$@" 2>&1)
code=$?
printf '%s\n' "$out"
fail() { echo "abort_test.sh: $*" >&2; exit 1; }
[ "$code" -eq 6 ] || fail "exit code $code, expected 6"
printf '%s\n' "$out" |
  grep -Eq "^shardcheck: rank $rank called MPI_Abort \(error code 1\) while running a case$" ||
  fail "no line naming rank $rank and code 1"
printf '%s\n' "$out" | grep -Eq "^replay: .*verify --replay 'strategy=mpi_abort(_leader)? p=" ||
  fail "no replay line"
python3 - "$prefix" "$aborted" <<'PY' || fail "results files"
import json, sys, xml.etree.ElementTree as et
prefix, aborted = sys.argv[1], sys.argv[2] == "yes"
j = json.load(open(prefix + ".json"))
assert j["complete"] is False, j["complete"]
names = [s["name"] for s in j["strategies"]]
assert names[0] == "data_parallel", names
if aborted:
    s = j["strategies"][-1]
    assert s["name"].startswith("mpi_abort"), names
    f = [f for f in s["failures"] if f["source"] == "aborted"]
    assert f and "called MPI_Abort (error code 1)" in f[0]["message"], s["failures"]
    assert "strategy=mpi_abort" in f[0]["replay"], f[0]
else:
    assert names == ["data_parallel"], names
et.parse(prefix + ".xml")
PY
