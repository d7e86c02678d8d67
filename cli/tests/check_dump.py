#!/usr/bin/env python3
"""Checks what `verify --replay LINE --dump DIR` wrote: every file README.txt names loads with
numpy.load, with the case's shapes and dtypes; the verdict recomputed from the files (every
|parallel - reference| within (gamma(k_par) + gamma(k_ref)) * magnitude / (1 - gamma(k_ref) in
f64), bitwise in exact mode) agrees with verify's exit code and with case.json, and with the
pictures' data (<stem>_error.dat, drawn into <stem>_error.png); the reference is within its own
rigorous bound of the oracle.

  check_dump.py DIR CODE -- COMMAND...   runs COMMAND (which must exit CODE: 0 pass, 1 fail)"""
import json
import os
import re
import subprocess
import sys

import numpy as np


def gamma(k, u):
    return k * u / (1 - k * u)


def main():
    out_dir, code = sys.argv[1], int(sys.argv[2])
    cmd = sys.argv[sys.argv.index("--") + 1:]
    r = subprocess.run(cmd)
    if r.returncode != code:
        raise SystemExit(f"check_dump: exit code {r.returncode}, expected {code}")
    with open(os.path.join(out_dir, "README.txt")) as f:
        readme = f.read()
    with open(os.path.join(out_dir, "case.json")) as f:
        case = json.load(f)
    line = dict(kv.split("=", 1) for kv in case["case"].split())
    M, N, K = int(line["M"]), int(line["N"]), int(line["K"])
    out_in = case["layout"] == "out_in"
    want_dtype = np.float32 if case["dtype"] == "f32" else np.float64
    shapes = {"x": (M, K), "w": (N, K) if out_in else (K, N), "dy": (M, N),
              "y": (M, N), "dx": (M, K), "dw": (N, K) if out_in else (K, N)}
    named = set(re.findall(r"\b([a-z]+(?:_[a-z]+)?)\.npy", readme))
    files = {}
    for stem in ["x", "w", "dy"]:
        files[stem] = np.load(os.path.join(out_dir, stem + ".npy"))
        if files[stem].dtype != want_dtype or files[stem].shape != shapes[stem]:
            raise SystemExit(f"{stem}.npy: {files[stem].dtype} {files[stem].shape}")
    for stem in ["y", "dx", "dw"]:
        for kind in ["parallel", "reference", "oracle", "magnitude"]:
            a = np.load(os.path.join(out_dir, f"{stem}_{kind}.npy"))
            dt = want_dtype if kind in ("parallel", "reference") else np.float64
            if a.dtype != dt or a.shape != shapes[stem]:
                raise SystemExit(f"{stem}_{kind}.npy: {a.dtype} {a.shape}")
            files[f"{stem}_{kind}"] = a
    for n in ["x", "w", "dy", "y_parallel"]:
        if n not in named:
            raise SystemExit(f"README.txt does not name {n}.npy")
    # The files themselves: Y's reference equals X·Wᵀ to rounding.
    x, w = files["x"].astype(np.float64), files["w"].astype(np.float64)
    y = x @ (w.T if out_in else w)
    if not np.allclose(y, files["y_oracle"], rtol=1e-12, atol=1e-12 * np.abs(y).max()):
        raise SystemExit("y_oracle.npy is not X.W^T")
    u, ud = case["u"], 2.0 ** -53
    within_all = True
    for t in case["tensors"]:
        stem = t["stem"]
        par, ref = files[f"{stem}_parallel"].astype(np.float64), files[f"{stem}_reference"]
        ref = ref.astype(np.float64)
        mag, orc = files[f"{stem}_magnitude"], files[f"{stem}_oracle"]
        # The reference against the oracle: its own rigorous bound (and the oracle's rounding).
        if np.any(np.abs(ref - orc) > (gamma(t["k_ref"], u) + ud) * mag * (1 + 1e-12)):
            raise SystemExit(f"{stem}: the reference is outside its bound of the oracle")
        if case["exact_mode"]:
            within = bool(np.all(par == ref))
        else:
            k_par = t["k_par"] if t["k_par"] is not None else 0
            bound = (gamma(k_par, u) + gamma(t["k_ref"], u)) * mag / (1 - gamma(t["k_ref"], ud))
            within = bool(np.all(np.isfinite(par)) and np.all(np.abs(par - ref) <= bound))
        if within != t["within_bound"]:
            raise SystemExit(f"{stem}: numpy says within={within}, case.json {t['within_bound']}")
        # The picture: a PNG, drawn from error / bound in bins whose largest value passes 1
        # exactly where the values are out of bound.
        if par.size > 0:
            with open(os.path.join(out_dir, f"{stem}_error.png"), "rb") as f:
                if f.read(8) != b"\x89PNG\r\n\x1a\n":
                    raise SystemExit(f"{stem}_error.png is not a PNG")
            drawn = np.atleast_2d(np.loadtxt(os.path.join(out_dir, f"{stem}_error.dat")))
            if bool(np.nanmax(drawn) <= 1) != within:
                raise SystemExit(f"{stem}_error.dat: largest error / bound {np.nanmax(drawn)}, "
                                 f"within={within}")
        within_all = within_all and within
    if within_all != (code == 0):
        raise SystemExit(f"the values say within={within_all}, verify exited {code}")
    print(f"check_dump: {len(files)} arrays loaded, verdict {'pass' if within_all else 'fail'}"
          f" agrees with verify")


if __name__ == "__main__":
    main()
