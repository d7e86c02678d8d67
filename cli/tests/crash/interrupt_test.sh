#!/usr/bin/env bash
# interrupt_test.sh PROGRAM: SIGTERM to mpirun mid-case, and SIGINT to a rank run directly, each
# print the verdicts finished so far and the running case's replay line; the rank run directly
# exits 130 (mpirun itself exits 1 after it has forwarded SIGTERM to its ranks: its own code).
set -u
program=$1
out=$(mktemp)
log=$(mktemp)
trap 'rm -f "$out" "$log"' EXIT
fail() { echo "interrupt_test: $*" >&2; cat "$out" >&2; exit 1; }

# Under mpirun: data_parallel finishes, then the `sleeps` kernel sleeps in its first case.
# --log-cases says when the sleeping case has begun.
mpirun -n 2 --oversubscribe "$program" verify --strategy data_parallel --strategy sleeps --p 2 \
  --cases 20 --quiet --log-cases "$log" >"$out" 2>&1 &
pid=$!
for _ in $(seq 300); do grep -q "strategy=sleeps" "$log" && break; sleep 0.1; done
sleep 1
kill -TERM "$pid"
wait "$pid"
grep -Eq "^data_parallel +20  pass" "$out" || fail "no finished verdict for data_parallel"
grep -q "^shardcheck: interrupted (SIGTERM) while running a case" "$out" || fail "no interrupt line"
grep -Eq "^replay: mpirun -n 2 .* verify --replay 'strategy=sleeps p=2 " "$out" || fail "no replay"

# Run directly (one rank, no mpirun): SIGINT ends it with 130.
: >"$log"
"$program" verify --strategy sleeps --cases 5 --quiet --log-cases "$log" >"$out" 2>&1 &
pid=$!
for _ in $(seq 300); do grep -q "strategy=sleeps" "$log" && break; sleep 0.1; done
sleep 1
kill -INT "$pid"
wait "$pid"
code=$?
[ "$code" -eq 130 ] || fail "exit code $code after SIGINT, expected 130"
grep -Eq "^replay: mpirun -n 1 .* verify --replay 'strategy=sleeps p=1 " "$out" || fail "no replay"
echo "interrupt_test: pass"
