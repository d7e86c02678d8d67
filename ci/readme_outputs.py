#!/usr/bin/env python3
"""Regenerates the output under every `$ shardcheck …` or `$ mpirun …` line of README.md's code
blocks by running the command, so that every output the README shows comes from the program.

  ci/readme_outputs.py                      rewrite README.md (shardcheck is build/cli/shardcheck)
  ci/readme_outputs.py --check [--shardcheck PATH] [--readme FILE] [--fail-fast]
                            [--in NAME=DIR --only NAME]
                                            report the blocks that differ and exit 1 (ctest
                                            readme.outputs); the commands run in a scratch
                                            directory, and PATH is written build/cli/shardcheck

A line `NAME$ command` (e.g. `build-outside$ …`) is a command run in a folder of a build outside
the tree: with `--in NAME=DIR` it runs in DIR (ci/outside_kernel.sh and ci/scalapack_kernel.sh
check their blocks so), without it the block is left alone. `--only NAME` checks those blocks
alone (the `$ ` ones are readme.outputs' in ctest).

--check compares modulo wall times ("0.22 s" in verify's table, "12.34 ms" in compare's), the
columns that no seed fixes; everything else must be as printed."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
readme = os.path.join(root, "README.md")
if "--readme" in sys.argv:  # another copy to check (the negative test checks a drifted one)
    readme = os.path.abspath(sys.argv[sys.argv.index("--readme") + 1])
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_mpi_yield_when_idle="1",
           OPENBLAS_NUM_THREADS="1")
check = "--check" in sys.argv
program = "build/cli/shardcheck"
if "--shardcheck" in sys.argv:
    program = os.path.abspath(sys.argv[sys.argv.index("--shardcheck") + 1])
workdir = tempfile.mkdtemp(prefix="readme_outputs.") if check else root
folders = {}  # prompt name → the folder its commands run in
for i, a in enumerate(sys.argv):
    if a == "--in":
        name, _, folder = sys.argv[i + 1].partition("=")
        folders[name] = os.path.abspath(folder)
only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
prompt = re.compile(r"^(?:([\w.-]+)\$|\$) ")


def run(command, folder=None):
    if folder is not None:
        out = subprocess.run(command, shell=True, cwd=folder, env=env, capture_output=True,
                             text=True)
        return out.stdout.rstrip("\n").split("\n")
    shell = re.sub(r"(^|\| |mpirun [^|]*?)shardcheck ", lambda m: m.group(1) + program + " ",
                   command, count=1)
    out = subprocess.run(shell, shell=True, cwd=workdir, env=env, capture_output=True, text=True)
    text = out.stdout.rstrip("\n")
    if program != "build/cli/shardcheck":
        text = text.replace(program, "build/cli/shardcheck")
    return text.split("\n")


def timeless(block):
    # "0.22 s" (verify's table) and "12.34 ms" (compare's time columns, each followed by a space)
    return [re.sub(r" +\d+\.\d\d (m?s) ", r" <time> \1 ", line) for line in block]


def untracked():
    out = subprocess.run(["git", "ls-files", "--others", "--exclude-standard"], cwd=root,
                         capture_output=True, text=True)
    return set(out.stdout.split())


before = set() if check else untracked()
lines = open(readme).read().split("\n")
result, i, changed = [], 0, 0
while i < len(lines):
    line = lines[i]
    result.append(line)
    i += 1
    m = prompt.match(line)
    if m is None:
        continue
    name, command = m.group(1), line[m.end():]
    if name is None and not (command.startswith("shardcheck ") or command.startswith("mpirun ")):
        continue
    if name is not None and name not in folders or only is not None and name != only:
        continue
    while command.endswith("\\") and i < len(lines):  # a command continued on the next line
        command = command[:-1] + " " + lines[i].strip()
        result.append(lines[i])
        i += 1
    old = []
    while i < len(lines) and not lines[i].startswith("```") and not prompt.match(lines[i]):
        old.append(lines[i])
        i += 1
    new = run(command, folders.get(name))
    if (timeless(new) != timeless(old)) if check else (new != old):
        changed += 1
        print("differs: " + line, file=sys.stderr)
        if check:
            for a, b in zip(old + [""] * len(new), new + [""] * len(old)):
                if timeless([a]) != timeless([b]):
                    print(f"  README:  {a}\n  program: {b}", file=sys.stderr)
                    break
            print("  the program printed:\n    " + "\n    ".join(new[:30]), file=sys.stderr)
            if "--fail-fast" in sys.argv:  # stop at the first difference
                break
    result.extend(new)
if check:
    shutil.rmtree(workdir, ignore_errors=True)
    print(f"{changed} block(s) differ from the program's output", file=sys.stderr)
    sys.exit(1 if changed else 0)
for left in untracked() - before:  # files the commands wrote (a corpus, say)
    os.remove(os.path.join(root, left))
open(readme, "w").write("\n".join(result))
print(f"{changed} block(s) rewritten", file=sys.stderr)
