#!/usr/bin/env bash
# expect.sh CODE REGEX -- COMMAND...: passes when COMMAND exits with CODE and its output matches
# REGEX (extended grep). Negative tests use it: a check that cannot fail is a defect.
set -u
want=$1 pattern=$2
shift 3
out=$("$@" 2>&1)
got=$?
printf '%s\n' "$out"
if [ "$got" -ne "$want" ]; then
  echo "expect.sh: exit code $got, expected $want" >&2
  exit 1
fi
if ! printf '%s\n' "$out" | grep -Eq -- "$pattern"; then
  echo "expect.sh: output does not match /$pattern/" >&2
  exit 1
fi
