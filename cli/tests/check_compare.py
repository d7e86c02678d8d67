#!/usr/bin/env python3
"""Checks what `shardcheck compare --out DIR` wrote: DIR/compare.json has every key, sane numbers
(finite, times positive, shares in [0, 1], a prediction beside every measurement) and the plots
it names exist as PNG and SVG.

  check_compare.py DIR RANKS -- COMMAND...   runs COMMAND, then checks DIR/compare.json
  check_compare.py --self-test               proves the check fires on broken copies"""
import copy
import json
import math
import os
import subprocess
import sys

STRATEGY_KEYS = ["name", "case", "mesh", "time_s", "compute_s", "comm_s", "comm_share", "reps_s",
                 "comm_reps_s", "predicted", "bytes_sent_per_rank", "bytes_received_per_rank",
                 "ledger_matches_claim", "memory", "error", "bubble", "ideal_speedup_ratio"]


def number(v, what, lo=0.0, hi=math.inf):
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
        raise ValueError(f"{what}: {v!r} is not a finite number")
    if not lo <= v <= hi:
        raise ValueError(f"{what}: {v} outside [{lo}, {hi}]")


def check(doc, ranks, plot_dir=None):
    for key in ["command", "machine", "shape", "backend", "reps", "cost_model", "reference",
                "strategies", "plots"]:
        if key not in doc:
            raise ValueError(f"missing key {key}")
    m = doc["machine"]
    for key in ["hostname", "cpu", "cores_online", "ranks", "open_mpi_coll_settings"]:
        if key not in m:
            raise ValueError(f"machine: missing {key}")
    if m["ranks"] != ranks:
        raise ValueError(f"machine.ranks {m['ranks']}, launched {ranks}")
    cm = doc["cost_model"]
    number(cm["alpha_s"], "alpha_s", 0, 1)
    number(cm["beta_bytes_per_s"], "beta", 1e3, 1e31)
    number(cm["gemm_flops_per_s"], "gemm rate", 1e6, 1e15)
    ref = doc["reference"]
    number(ref["time_s"], "reference time", 1e-9)
    number(ref["predicted_time_s"], "reference prediction", 1e-12)
    number(ref["achieved_flops_per_s"], "reference achieved rate", 1e6, 1e15)
    number(cm["collective_alpha_s"], "collective alpha", 0, 1)
    number(cm["collective_beta_bytes_per_s"], "collective beta", 1e3, 1e31)
    if len(ref["reps_s"]) != doc["reps"]:
        raise ValueError("reference: reps_s has the wrong length")
    if not doc["strategies"]:
        raise ValueError("no strategy was compared")
    for s in doc["strategies"]:
        name = s.get("name", "?")
        for key in STRATEGY_KEYS:
            if key not in s:
                raise ValueError(f"{name}: missing {key}")
        number(s["time_s"], f"{name}.time_s", 1e-9)
        number(s["compute_s"], f"{name}.compute_s", 0, s["time_s"])
        number(s["comm_s"], f"{name}.comm_s", 0, s["time_s"] * 1.000001)
        number(s["comm_share"], f"{name}.comm_share", 0, 1.000001)
        if len(s["reps_s"]) != doc["reps"] or len(s["comm_reps_s"]) != doc["reps"]:
            raise ValueError(f"{name}: one time per repetition expected")
        pr = s["predicted"]
        number(pr["time_s"], f"{name}.predicted.time_s", 1e-12)
        number(pr["compute_s"], f"{name}.predicted.compute_s")
        number(pr["comm_s"], f"{name}.predicted.comm_s")
        if len(pr["per_rank_s"]) != ranks:
            raise ValueError(f"{name}: a prediction per rank expected")
        for key in ["bytes_sent_per_rank", "bytes_received_per_rank"]:
            if len(s[key]) != ranks:
                raise ValueError(f"{name}.{key}: one value per rank expected")
            for v in s[key]:
                number(v, f"{name}.{key}")
        mem = s["memory"]
        for key in ["inputs_bytes_per_rank", "peak_bytes_per_rank"]:
            if len(mem[key]) != ranks:
                raise ValueError(f"{name}.memory.{key}: one value per rank expected")
            for v in mem[key]:
                number(v, f"{name}.memory.{key}")
        if s["ledger_matches_claim"] is not True:
            raise ValueError(f"{name}: the ledger differs from the cost model's claim")
        err = s["error"]
        if err["finite"] is not True:
            raise ValueError(f"{name}: non-finite outputs")
        number(err["bound_share"], f"{name}.error.bound_share", 0, 1)
        number(err["statistical_share"], f"{name}.error.statistical_share", 0, 1)
        if err["err_u_mag"] is not None:
            number(err["err_u_mag"], f"{name}.error.err_u_mag")
        if s["bubble"] is not None:
            number(s["bubble"]["theory"], f"{name}.bubble.theory", 0, 1)
    if plot_dir is not None:
        for ext in ["png", "svg"]:
            for what in ["time", "memory", "bytes"]:
                f = f"compare_{what}.{ext}"
                if f not in doc["plots"]:
                    raise ValueError(f"plot {f} not written")
                if not os.path.getsize(os.path.join(plot_dir, f)):
                    raise ValueError(f"plot {f} is empty")


def self_test(doc, ranks):
    """Every kind of breakage is caught."""
    breaks = [
        ("missing key", lambda d: d.pop("cost_model")),
        ("no prediction", lambda d: d["strategies"][0]["predicted"].pop("time_s")),
        ("NaN time", lambda d: d["strategies"][0].__setitem__("time_s", float("nan"))),
        ("comm above time", lambda d: d["strategies"][0].__setitem__("comm_s", 1e9)),
        ("bound exceeded", lambda d: d["strategies"][0]["error"].__setitem__("bound_share", 2.0)),
        ("wrong rank count", lambda d: d["strategies"][0]["bytes_sent_per_rank"].append(0)),
    ]
    for what, spoil in breaks:
        bad = copy.deepcopy(doc)
        spoil(bad)
        try:
            check(bad, ranks)
        except (ValueError, KeyError, TypeError):
            continue
        raise SystemExit(f"check_compare.py --self-test: '{what}' was not caught")


def main():
    args = sys.argv[1:]
    out_dir, ranks = args[0], int(args[1])
    command = args[args.index("--") + 1:]
    run = subprocess.run(command, capture_output=True, text=True)
    sys.stdout.write(run.stdout)
    sys.stderr.write(run.stderr)
    if run.returncode != 0:
        raise SystemExit(f"compare exited {run.returncode}")
    header = [l for l in run.stdout.split("\n") if l.startswith("strategy ")]
    if not header or "predicted" not in header[0]:
        raise SystemExit("the table has no predicted column")
    with open(os.path.join(out_dir, "compare.json")) as f:
        doc = json.load(f)
    check(doc, ranks, out_dir)
    self_test(doc, ranks)
    print(f"check_compare.py: {len(doc['strategies'])} strategies, JSON and "
          f"{len(doc['plots'])} plots sane")


if __name__ == "__main__":
    main()
