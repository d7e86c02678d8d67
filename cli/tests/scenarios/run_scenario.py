#!/usr/bin/python3
"""Runs CLI scenario files (cli/tests/scenarios/*.scenario), LLVM lit style.

A scenario is one command, its ranks, its exit code and the lines it must print:

    # compare refuses a negative latency: a non-positive value is bad usage.
    RANKS: 1
    RUN: %{shardcheck} compare --M 4 --N 4 --K 4 --alpha -1
    EXIT: 2
    CHECK: --alpha: must be a positive number

Directives (one a line; `#` starts a comment):
  RUN: <shell command>     the command (one; bash -c). Substitutions: %{shardcheck},
                           %{crash_kernels} (the programs under test), %{mpirun} (mpiexec -n
                           RANKS --oversubscribe), %{tmp} (a fresh directory, removed after),
                           %{here} (the scenarios' directory).
  RANKS: <n>               ranks the command uses (ctest reserves as many processors); default 1
  EXIT: <code>             the exit code it must end with
  CHECK: <regex>           a line of its output (stdout and stderr) must match (Python re.search)
  CHECK-NOT: <regex>       no line may match
  SETUP: <shell command>   run before RUN; must exit 0 (e.g. a small tmpfs, a full file)
  AFTER: <shell command>   run after RUN; must exit 0 (e.g. a result file is valid JSON)
  CLEANUP: <shell command> run at the end whatever happened (e.g. umount)
  SIGNAL: <SIG> <path> <s> once <path> exists, wait <s> seconds and send SIGnal to the command
  REQUIRES: root           the scenario needs root (mount, cgroups): without it, exit 77
                           (ctest reports the scenario as skipped, never as passed)
  TIMEOUT: <seconds>       default 60
  SERIAL: <why>            ctest runs it alone (it times a case out, or the machine)

usage: run_scenario.py --shardcheck PATH [--crash-kernels PATH] [--mpiexec PATH] FILE...
Exit 0 when every scenario passes, 1 when one fails, 77 when all that did not pass were skipped.
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77


class Scenario:
    def __init__(self, path):
        self.path = path
        self.run = None
        self.ranks = 1
        self.exit = None
        self.checks, self.check_nots = [], []
        self.setup, self.after, self.cleanup = [], [], []
        self.signal = None
        self.requires = []
        self.timeout = 60
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                line = line.rstrip("\n")
                if not line.strip() or line.lstrip().startswith("#"):
                    continue
                key, sep, value = line.partition(":")
                if not sep:
                    raise ValueError(f"{path}:{number}: not a directive: {line!r}")
                key, value = key.strip(), value.strip()
                if key == "RUN":
                    if self.run is not None:
                        raise ValueError(f"{path}:{number}: a scenario runs one command")
                    self.run = value
                elif key == "RANKS":
                    self.ranks = int(value)
                elif key == "EXIT":
                    self.exit = int(value)
                elif key == "CHECK":
                    self.checks.append(value)
                elif key == "CHECK-NOT":
                    self.check_nots.append(value)
                elif key == "SETUP":
                    self.setup.append(value)
                elif key == "AFTER":
                    self.after.append(value)
                elif key == "CLEANUP":
                    self.cleanup.append(value)
                elif key == "SIGNAL":
                    sig, file, seconds = value.split()
                    self.signal = (getattr(signal, "SIG" + sig), file, float(seconds))
                elif key == "REQUIRES":
                    self.requires.append(value)
                elif key == "SERIAL":
                    pass  # read by CMakeLists.txt
                elif key == "TIMEOUT":
                    self.timeout = float(value)
                else:
                    raise ValueError(f"{path}:{number}: unknown directive {key!r}")
        if self.run is None or self.exit is None:
            raise ValueError(f"{path}: RUN and EXIT are required")


def environment():
    env = dict(os.environ)
    env.update(
        OMPI_ALLOW_RUN_AS_ROOT="1",
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
        OPENBLAS_NUM_THREADS="1",
        OMPI_MCA_mpi_yield_when_idle="1",
    )
    return env


def shell(command, env, timeout):
    return subprocess.run(["bash", "-c", command], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=timeout, text=True, errors="replace")


def run_one(path, args):
    s = Scenario(path)
    name = os.path.basename(path)
    if "root" in s.requires and os.geteuid() != 0:
        print(f"SKIPPED {name}: needs root (REQUIRES: root)")
        return SKIP
    tmp = tempfile.mkdtemp(prefix="scenario.")
    subs = {
        "%{shardcheck}": args.shardcheck,
        "%{crash_kernels}": args.crash_kernels or "crash_kernels-not-given",
        "%{mpirun}": f"{args.mpiexec} -n {s.ranks} --oversubscribe",
        "%{tmp}": tmp,
        "%{here}": os.path.dirname(os.path.abspath(path)),
    }

    def expand(text):
        for k, v in subs.items():
            text = text.replace(k, v)
        return text

    env = environment()
    problems = []
    output = ""
    try:
        for c in s.setup:
            r = shell(expand(c), env, s.timeout)
            if r.returncode != 0:
                problems.append(f"SETUP failed ({r.returncode}): {expand(c)}\n{r.stdout}")
        if not problems:
            command = expand(s.run)
            print(f"$ {command}", flush=True)
            start = time.monotonic()
            # exec: a signal reaches the command itself (mpirun, or the program), not bash.
            proc = subprocess.Popen(["bash", "-c", ("exec " if s.signal else "") + command],
                                    env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, errors="replace", start_new_session=True)
            if s.signal:
                sig, file, delay = s.signal
                file = expand(file)
                while not os.path.exists(file) and proc.poll() is None and \
                        time.monotonic() - start < s.timeout:
                    time.sleep(0.05)
                if not os.path.exists(file):
                    problems.append(f"SIGNAL: {file} never appeared")
                time.sleep(delay)
                if proc.poll() is None:
                    proc.send_signal(sig)
            try:
                output, _ = proc.communicate(timeout=max(1, s.timeout - (time.monotonic() - start)))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                output, _ = proc.communicate()
                problems.append(f"timed out after {s.timeout} s")
            print(output, end="" if output.endswith("\n") or not output else "\n")
            if proc.returncode != s.exit:
                problems.append(f"exit code {proc.returncode}, expected {s.exit}")
            lines = output.splitlines()
            for c in s.checks:
                if not any(re.search(c, line) for line in lines):
                    problems.append(f"no line matches CHECK: {c}")
            for c in s.check_nots:
                hit = [line for line in lines if re.search(c, line)]
                if hit:
                    problems.append(f"CHECK-NOT: {c} matches: {hit[0]}")
            for c in s.after:
                r = shell(expand(c), env, s.timeout)
                if r.returncode != 0:
                    problems.append(f"AFTER failed ({r.returncode}): {expand(c)}\n{r.stdout}")
    finally:
        for c in s.cleanup:
            shell(expand(c), env, s.timeout)
        shutil.rmtree(tmp, ignore_errors=True)
    if problems:
        print(f"FAIL {name}:")
        for p in problems:
            print(f"  {p}")
        return 1
    print(f"PASS {name}")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shardcheck", required=True)
    ap.add_argument("--crash-kernels")
    ap.add_argument("--mpiexec", default=shutil.which("mpiexec") or "mpiexec")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    codes = [run_one(f, args) for f in args.files]
    if len(args.files) > 1:
        failed = [os.path.basename(f) for f, c in zip(args.files, codes) if c == 1]
        print(f"{codes.count(0)} passed, {len(failed)} failed, {codes.count(SKIP)} skipped")
        for f in failed:
            print(f"  failed: {f}")
    if 1 in codes:
        return 1
    return SKIP if SKIP in codes and 0 not in codes else 0


if __name__ == "__main__":
    sys.exit(main())
