#!/usr/bin/env python3
"""Regenerates the output under every `$ shardcheck …` or `$ mpirun …` line of README.md's code
blocks by running the command (shardcheck is build/cli/shardcheck), so that every output the
README shows comes from the program. `--check` only reports the blocks that differ (exit 1)."""
import os
import re
import subprocess
import sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
readme = os.path.join(root, "README.md")
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_mpi_yield_when_idle="1",
           OPENBLAS_NUM_THREADS="1")


def run(command):
    shell = re.sub(r"(^|\| |mpirun [^|]*?)shardcheck ", lambda m: m.group(1) + "build/cli/shardcheck ",
                   command, count=1)
    out = subprocess.run(shell, shell=True, cwd=root, env=env, capture_output=True, text=True)
    return out.stdout.rstrip("\n").split("\n")


def untracked():
    out = subprocess.run(["git", "ls-files", "--others", "--exclude-standard"], cwd=root,
                         capture_output=True, text=True)
    return set(out.stdout.split())


before = untracked()
lines = open(readme).read().split("\n")
result, i, changed = [], 0, 0
while i < len(lines):
    line = lines[i]
    result.append(line)
    i += 1
    if not line.startswith("$ shardcheck ") and not line.startswith("$ mpirun "):
        continue
    command = line[2:]
    while command.endswith("\\") and i < len(lines):  # a command continued on the next line
        command = command[:-1] + " " + lines[i].strip()
        result.append(lines[i])
        i += 1
    old = []
    while i < len(lines) and not lines[i].startswith("```") and not lines[i].startswith("$ "):
        old.append(lines[i])
        i += 1
    new = run(command)
    if new != old:
        changed += 1
        print("differs: " + line, file=sys.stderr)
    result.extend(new)
for left in untracked() - before:  # files the commands wrote (a corpus, say)
    os.remove(os.path.join(root, left))
if "--check" in sys.argv:
    sys.exit(1 if changed else 0)
open(readme, "w").write("\n".join(result))
print(f"{changed} block(s) rewritten", file=sys.stderr)
