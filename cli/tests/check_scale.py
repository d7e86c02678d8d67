#!/usr/bin/env python3
"""Checks what `shardcheck scale --out DIR` wrote: for every strategy, the largest rank's
verification work is the same at every p (the input panels generated for the reference, in
bytes, and the reference's and magnitudes' flops: identical, since each rank's shard is fixed),
and its peak memory and the meter's peak while checking do not grow with p: at most the p = 1
figure plus 1/8 of it (allocator rounding, a ledger entry per collective, comm buffers), where a
share of the global problem held on one rank grows by a whole shard per doubling.

  check_scale.py DIR -- COMMAND...                  runs COMMAND, then checks DIR/scale.json
  check_scale.py --expect-growth DIR -- COMMAND...  passes only if some figure grows (negative)
  check_scale.py --self-test                        proves the check fires on broken copies"""
import copy
import json
import math
import os
import subprocess
import sys

EXACT = ["check_panel_bytes", "check_flops"]
SLACK = ["peak_bytes", "check_peak_bytes"]


def check(doc, plot_dir=None):
    for key in ["machine", "unit", "workers", "rules", "points", "plots"]:
        if key not in doc:
            raise ValueError(f"missing key {key}")
    by = {}
    for pt in doc["points"]:
        if pt.get("failure"):
            raise ValueError(f"{pt['strategy']} p={pt['p']} failed: {pt['failure']}")
        if len(pt["per_rank"]["peak_bytes"]) != pt["p"]:
            raise ValueError(f"{pt['strategy']} p={pt['p']}: not one figure per rank")
        by.setdefault(pt["strategy"], []).append(pt)
    if not by:
        raise ValueError("no strategy was scaled")
    for name, pts in by.items():
        pts.sort(key=lambda q: q["p"])
        if len(pts) < 2:
            raise ValueError(f"{name}: fewer than two worker counts")
        first = pts[0]["largest_rank"]
        for key in EXACT + SLACK:
            v = first[key]
            if not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise ValueError(f"{name} p={pts[0]['p']}: {key} = {v!r}, not a positive number")
        for pt in pts[1:]:
            got = pt["largest_rank"]
            for key in EXACT:
                if got[key] != first[key]:
                    raise ValueError(f"{name}: {key} {got[key]:.0f} at p={pt['p']}, "
                                     f"{first[key]:.0f} at p={pts[0]['p']}: it grows with p")
            for key in SLACK:
                if got[key] > first[key] * 1.125:
                    raise ValueError(f"{name}: {key} {got[key]:.0f} at p={pt['p']}, above "
                                     f"{first[key]:.0f} at p={pts[0]['p']} plus 1/8")
    if plot_dir is not None and doc["plots"]:
        for f in doc["plots"]:
            if not os.path.getsize(os.path.join(plot_dir, f)):
                raise ValueError(f"plot {f} is empty")
        if sorted(doc["plots"]) != ["scale.png", "scale.svg"]:
            raise ValueError(f"plots {doc['plots']}, expected scale.png and scale.svg")


def self_test(doc):
    grows = copy.deepcopy(doc)
    last = max(grows["points"], key=lambda q: q["p"])
    last["largest_rank"]["check_flops"] *= 2
    peak = copy.deepcopy(doc)
    last = max(peak["points"], key=lambda q: q["p"])
    last["largest_rank"]["peak_bytes"] *= 1.5
    failed = copy.deepcopy(doc)
    failed["points"][0]["failure"] = "forward: …"
    for broken, what in [(grows, "flops growing"), (peak, "peak growing"), (failed, "a failure")]:
        try:
            check(broken)
        except ValueError:
            continue
        raise SystemExit(f"check_scale.py: the check missed {what}")


def main(argv):
    expect_growth = False
    if argv[1:2] == ["--expect-growth"]:
        expect_growth = True
        argv = argv[1:]
    if len(argv) < 4 or argv[2] != "--":
        raise SystemExit(__doc__)
    out = argv[1]
    rc = subprocess.call(argv[3:])
    if rc != 0:
        raise SystemExit(f"check_scale.py: the command exited {rc}")
    with open(os.path.join(out, "scale.json")) as f:
        doc = json.load(f)
    try:
        check(doc, out)
    except ValueError as e:
        if expect_growth:
            print(f"check_scale.py: caught, as expected: {e}")
            return
        raise SystemExit(f"check_scale.py: {e}")
    if expect_growth:
        raise SystemExit("check_scale.py: nothing grew, yet the shapes were not weak-scaled")
    self_test(doc)
    print(f"check_scale.py: {len(doc['points'])} points flat; the checks fire on broken copies")


if __name__ == "__main__":
    main(sys.argv)
