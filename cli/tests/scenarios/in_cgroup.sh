#!/usr/bin/env bash
# in_cgroup.sh BYTES COMMAND...: runs COMMAND in a new memory cgroup limited to BYTES (cgroup v2
# memory.max, or v1 memory.limit_in_bytes), removed after. Needs root.
set -eu
limit=$1
shift
name=shardcheck_scenario_$$
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then  # cgroup v2 (unified)
  dir=/sys/fs/cgroup/$name
  grep -qw memory /sys/fs/cgroup/cgroup.subtree_control ||
    echo +memory >/sys/fs/cgroup/cgroup.subtree_control
  mkdir "$dir"
  echo "$limit" >"$dir/memory.max"
else  # cgroup v1
  dir=/sys/fs/cgroup/memory/$name
  mkdir "$dir"
  echo "$limit" >"$dir/memory.limit_in_bytes"
fi
# Out of it and removed at the end (once the command's last processes, Open MPI's, are gone).
leave() {
  echo $$ >"$(dirname "$dir")/cgroup.procs" 2>/dev/null
  for _ in $(seq 100); do rmdir "$dir" 2>/dev/null && return; sleep 0.1; done
}
trap leave EXIT
echo $$ >"$dir/cgroup.procs"
set +e
"$@"
code=$?
exit $code
