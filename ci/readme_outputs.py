#!/usr/bin/env python3
"""Regenerates the output under every `$ shardcheck …` or `$ mpirun …` line of the code blocks of
README.md and of every docs/*.md page by running the command, so that every output the
documentation shows comes from the program.

  ci/readme_outputs.py                      rewrite README.md and docs/*.md (shardcheck is
                                            build/cli/shardcheck)
  ci/readme_outputs.py --check [--shardcheck PATH] [--page FILE]... [--fail-fast]
                            [--in NAME=DIR --only NAME]
                                            report the blocks that differ and exit 1 (ctest
                                            readme.outputs); the commands run in a scratch
                                            directory, and PATH is written build/cli/shardcheck

--page FILE (repeatable) takes those files instead of README.md and docs/*.md. A line
`NAME$ command` (e.g. `build-outside$ …`) is a command run in a folder of a build outside the
tree: with `--in NAME=DIR` it runs in DIR (ci/outside_kernel.sh and ci/scalapack_kernel.sh check
their blocks so, wherever in the pages they are), without it the block is left alone.
`--only NAME` checks those blocks alone (the `$ ` ones are readme.outputs' in ctest).

--check compares modulo wall times ("0.22 s" in verify's table, "12.34 ms" in compare's), the
columns that no seed fixes; everything else must be as printed."""

import argparse
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

parser = argparse.ArgumentParser(
    description="Regenerate or check the command outputs of README.md and docs/*.md.")
parser.add_argument("--check", action="store_true",
                    help="report the blocks that differ and exit 1; the pages are left alone")
parser.add_argument("--shardcheck", metavar="PATH", help="the shardcheck binary "
                    "(default build/cli/shardcheck); its path is written build/cli/shardcheck")
parser.add_argument("--page", metavar="FILE", action="append", default=[],
                    help="a page to take instead of README.md and docs/*.md (repeatable)")
parser.add_argument("--fail-fast", action="store_true", help="stop at the first difference")
parser.add_argument("--in", dest="folders", metavar="NAME=DIR", action="append", default=[],
                    help="run the `NAME$ ` commands in DIR")
parser.add_argument("--only", metavar="NAME", help="check the `NAME$ ` blocks alone")
parser.add_argument("--recorded", metavar="COMMAND=FILE", action="append", default=[],
                    help="take COMMAND's output from FILE (a test that ran it kept it) where a "
                    "block runs COMMAND, alone or piped onward; a missing FILE is an error")
args = parser.parse_args()  # an unknown argument exits 2 with usage, and no page is touched

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if args.page:
    pages = [os.path.abspath(page) for page in args.page]
else:
    pages = [os.path.join(root, "README.md")]
    pages += sorted(glob.glob(os.path.join(root, "docs", "*.md")))
# The error figures are measured, and OpenBLAS picks its kernels by CPU: SkylakeX's AVX-512
# kernels sum in another order than Haswell's AVX2 ones, and verify's err/u·mag columns differ in
# the last digits. The pages' outputs are taken on Haswell's kernels (any x86-64 CPU with AVX2
# runs them), so that they are reproducible on every such machine; OPENBLAS_CORETYPE set by the
# caller wins.
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_mpi_yield_when_idle="1",
           OPENBLAS_NUM_THREADS="1")
env.setdefault("OPENBLAS_CORETYPE", "Haswell")
check = args.check
program = os.path.abspath(args.shardcheck) if args.shardcheck else "build/cli/shardcheck"
workdir = tempfile.mkdtemp(prefix="readme_outputs.") if check else root
folders = {}  # prompt name → the folder its commands run in
for spec in args.folders:
    name, _, folder = spec.partition("=")
    folders[name] = os.path.abspath(folder)
only = args.only
prompt = re.compile(r"^(?:([\w.-]+)\$|\$) ")


recorded = {}  # command → the file holding its output
for spec in args.recorded:
    command, _, path = spec.rpartition("=")
    if not command or not os.path.isfile(path):
        sys.exit(f"readme_outputs.py: --recorded {spec}: no such output file")
    recorded[command] = os.path.abspath(path)


def run(command, folder=None):
    for head, path in recorded.items():
        if folder is None and (command == head or command.startswith(head + " |")):
            command = "cat " + shlex.quote(path) + command[len(head):]
            break
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


def rewrite(page):
    """The page's lines with every output regenerated, and how many blocks differed."""
    name = os.path.relpath(page, root) if page.startswith(root + os.sep) else page
    lines = open(page).read().split("\n")
    result, i, changed = [], 0, 0
    while i < len(lines):
        line = lines[i]
        result.append(line)
        i += 1
        m = prompt.match(line)
        if m is None:
            continue
        folder, command = m.group(1), line[m.end():]
        if folder is None and not (command.startswith("shardcheck ") or
                                   command.startswith("mpirun ")):
            continue
        if folder is not None and folder not in folders or only is not None and folder != only:
            continue
        while command.endswith("\\") and i < len(lines):  # a command continued on the next line
            command = command[:-1] + " " + lines[i].strip()
            result.append(lines[i])
            i += 1
        old = []
        while i < len(lines) and not lines[i].startswith("```") and not prompt.match(lines[i]):
            old.append(lines[i])
            i += 1
        new = run(command, folders.get(folder))
        if (timeless(new) != timeless(old)) if check else (new != old):
            changed += 1
            print(f"differs: {name}: {line}", file=sys.stderr)
            if check:
                for a, b in zip(old + [""] * len(new), new + [""] * len(old)):
                    if timeless([a]) != timeless([b]):
                        print(f"  page:    {a}\n  program: {b}", file=sys.stderr)
                        break
                print("  the program printed:\n    " + "\n    ".join(new[:30]), file=sys.stderr)
                if args.fail_fast:  # stop at the first difference
                    break
        result.extend(new)
    return result, changed


before = set() if check else untracked()
changed = 0
for page in pages:
    result, differ = rewrite(page)
    changed += differ
    if not check and differ:
        open(page, "w").write("\n".join(result))
    if check and differ and args.fail_fast:
        break
if check:
    shutil.rmtree(workdir, ignore_errors=True)
    print(f"{changed} block(s) differ from the program's output", file=sys.stderr)
    sys.exit(1 if changed else 0)
for left in untracked() - before:  # files the commands wrote (a corpus, say)
    os.remove(os.path.join(root, left))
print(f"{changed} block(s) rewritten", file=sys.stderr)
