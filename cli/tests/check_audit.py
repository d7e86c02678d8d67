#!/usr/bin/env python3
"""Checks what `shardcheck audit --out DIR` wrote: audit.csv parses with a row per cell and
tensor, audit.json has the sweep, the Open MPI settings, finite errors and shares for every cell
and a summary per strategy, tensor and dtype; audit_summary.md names every strategy; every plot
it names exists, PNG beginning with the PNG signature and SVG parsing as XML.

  check_audit.py DIR CODE -- COMMAND...   runs COMMAND (which must exit CODE), then checks DIR
  check_audit.py --self-test              proves the check fires on broken copies"""
import copy
import csv
import io
import json
import math
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

CELL_KEYS = ["strategy", "tensor", "dtype", "acc", "reduce", "backend", "p", "K", "k_par",
             "k_reduced", "k_ref", "elements",
             "parallel", "reference", "rigorous_share", "statistical_share", "lambda", "replay"]
SUMMARY_KEYS = ["strategy", "tensor", "dtype", "max_err_u_mag", "mean_err_u_mag",
                "rigorous_share", "statistical_share", "alpha_K_mean", "alpha_K_chain",
                "alpha_K_reference_mean", "alpha_p_mean", "flags", "flagged"]


def number(v, what, lo=0.0, hi=math.inf):
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
        raise ValueError(f"{what}: {v!r} is not a finite number")
    if not lo <= v <= hi:
        raise ValueError(f"{what}: {v} outside [{lo}, {hi}]")


def check(doc, csv_text, summary, plot_dir=None):
    for key in ["command", "sweep", "open_mpi", "rule", "summary", "cells", "plots"]:
        if key not in doc:
            raise ValueError(f"missing key {key}")
    mpi = doc["open_mpi"]
    if "environment" not in mpi or "mpi_t_control_variables" not in mpi:
        raise ValueError("open_mpi: the environment and the MPI_T control variables")
    if not doc["cells"]:
        raise ValueError("no cell was measured")
    for c in doc["cells"]:
        for key in CELL_KEYS:
            if key not in c:
                raise ValueError(f"cell {c.get('replay', '?')}: missing {key}")
        name = f"{c['strategy']} {c['tensor']} K={c['K']} p={c['p']}"
        number(c["parallel"]["max_err_u_mag"], f"{name} max error")
        number(c["parallel"]["mean_err_u_mag"], f"{name} mean error", 0,
               c["parallel"]["max_err_u_mag"] * (1 + 1e-12))
        number(c["reference"]["max_err_u_mag"], f"{name} reference max error")
        number(c["rigorous_share"], f"{name} rigorous share")
        number(c["statistical_share"], f"{name} statistical share")
        # bf16 and f16 cells carry their precision policy; f32 and f64 cells none.
        mixed = c["dtype"] in ("bf16", "f16")
        if mixed != (c["acc"] is not None) or mixed != (c["reduce"] is not None):
            raise ValueError(f"{name} {c['dtype']}: acc={c['acc']} reduce={c['reduce']}")
    strategies = {c["strategy"] for c in doc["cells"]}
    for s in doc["summary"]:
        for key in SUMMARY_KEYS:
            if key not in s:
                raise ValueError(f"summary {s.get('strategy', '?')}: missing {key}")
        if s["flagged"] != bool(s["flags"]):
            raise ValueError(f"summary {s['strategy']}: flagged disagrees with its flags")
    rows = list(csv.DictReader(io.StringIO(csv_text)))
    if len(rows) != len(doc["cells"]):
        raise ValueError(f"audit.csv has {len(rows)} rows, audit.json {len(doc['cells'])} cells")
    for r in rows:
        float(r["max_err_u_mag"])
        int(r["K"])
    for s in strategies:
        if s not in summary:
            raise ValueError(f"audit_summary.md does not name {s}")
    if plot_dir is not None:
        for s in strategies:
            for ext in ("png", "svg"):
                if f"audit_{s}.{ext}" not in doc["plots"]:
                    raise ValueError(f"no {ext} plot for {s}")
        for p in doc["plots"]:
            path = os.path.join(plot_dir, p)
            with open(path, "rb") as f:
                data = f.read()
            if p.endswith(".png") and not data.startswith(b"\x89PNG\r\n\x1a\n"):
                raise ValueError(f"{p} is not a PNG")
            if p.endswith(".svg"):
                ET.fromstring(data)


def self_test():
    cell = {k: 0 for k in CELL_KEYS}
    cell.update({"strategy": "s", "tensor": "Y", "replay": "r", "dtype": "f32", "acc": None,
                 "reduce": None,
                 "parallel": {"max_err_u_mag": 1.0, "mean_err_u_mag": 0.5},
                 "reference": {"max_err_u_mag": 1.0, "mean_err_u_mag": 0.5},
                 "rigorous_share": 0.01, "statistical_share": 0.1})
    summ = {k: None for k in SUMMARY_KEYS}
    summ.update({"strategy": "s", "flags": [], "flagged": False})
    doc = {"command": "audit", "sweep": {}, "open_mpi": {"environment": {},
           "mpi_t_control_variables": {}}, "rule": "r", "summary": [summ], "cells": [cell],
           "plots": []}
    csv_text = "strategy,K,max_err_u_mag\ns,16,1.0\n"
    check(doc, csv_text, "| s |")
    broken = []
    d = copy.deepcopy(doc); del d["open_mpi"]; broken.append((d, csv_text, "| s |"))
    d = copy.deepcopy(doc); d["cells"][0]["parallel"]["max_err_u_mag"] = float("nan")
    broken.append((d, csv_text, "| s |"))
    d = copy.deepcopy(doc); d["cells"][0]["statistical_share"] = -0.001
    broken.append((d, csv_text, "| s |"))
    d = copy.deepcopy(doc); d["summary"][0]["flagged"] = True; broken.append((d, csv_text, "| s |"))
    d = copy.deepcopy(doc); d["cells"][0]["dtype"] = "bf16"; broken.append((d, csv_text, "| s |"))
    broken.append((doc, "strategy,K,max_err_u_mag\n", "| s |"))
    broken.append((doc, csv_text, "nothing"))
    for i, (d, c, s) in enumerate(broken):
        try:
            check(d, c, s)
        except (ValueError, KeyError):
            continue
        raise SystemExit(f"self-test: broken copy {i} passed")
    print(f"self-test: {len(broken)} broken copies caught")


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return
    out_dir, code = sys.argv[1], int(sys.argv[2])
    cmd = sys.argv[sys.argv.index("--") + 1:]
    r = subprocess.run(cmd)
    if r.returncode != code:
        raise SystemExit(f"check_audit: exit code {r.returncode}, expected {code}")
    with open(os.path.join(out_dir, "audit.json")) as f:
        doc = json.load(f)
    with open(os.path.join(out_dir, "audit.csv")) as f:
        csv_text = f.read()
    with open(os.path.join(out_dir, "audit_summary.md")) as f:
        summary = f.read()
    check(doc, csv_text, summary, out_dir)
    print(f"check_audit: {len(doc['cells'])} cells, {len(doc['summary'])} summary rows, "
          f"{len(doc['plots'])} plots")


if __name__ == "__main__":
    main()
