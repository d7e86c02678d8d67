#!/usr/bin/env bash
# hooks_test.sh N COMMAND...: COMMAND (a verify of hooks_kernels on N ranks) exits 0, and each of
# the N ranks printed that its init and finalize hooks ran once each, with MPI up and returning
# errors.
set -u
n=$1
shift
out=$("$@" 2>&1)
code=$?
printf '%s\n' "$out"
[ "$code" -eq 0 ] || { echo "hooks_test.sh: exit code $code, expected 0" >&2; exit 1; }
for ((r = 0; r < n; r++)); do
  got=$(printf '%s\n' "$out" | grep -c "^hooks: rank $r: init 1, finalize 1, MPI up, errors return$")
  [ "$got" -eq 1 ] || { echo "hooks_test.sh: rank $r's hooks line seen $got times" >&2; exit 1; }
done
[ "$(printf '%s\n' "$out" | grep -c '^hooks: ')" -eq "$n" ] || { echo "hooks_test.sh: not $n hooks lines" >&2; exit 1; }
