#!/usr/bin/env python3
"""Reads verify's result files as a CI system would.

check_results.py suite JUNIT JSON -- COMMAND...
    runs COMMAND (verify over data_parallel and mutant.ag_reversed@data_parallel, writing JUNIT
    and JSON), expects exit 1, then checks the counts, the mutant's forward failure with its
    message (naming the shape of the error, also the JSON's "shape") and replay line, and the
    JSON fields.
check_results.py interrupted JUNIT JSON -- COMMAND...
    runs COMMAND (data_parallel, then a mutant that hangs until the watchdog ends the job with
    exit 3) and checks that both files keep the finished strategy, the JSON marked incomplete.
check_results.py hostile JUNIT
    reads the file results_test wrote from hostile strings with a strict parser and compares the
    failure message with the expected text beside it.
"""
import json
import subprocess
import sys

from junitparser import Failure, JUnitXml, Skipped


def fail(why):
    print("check_results.py: " + why, file=sys.stderr)
    sys.exit(1)


def cases_of(xml):
    return {(s.name, c.name): c for s in xml for c in s}


def check_suite(junit, json_path, command):
    run = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(run.stdout)
    if run.returncode != 1:
        fail(f"verify exited {run.returncode}, expected 1 (the mutant fails)")
    xml = JUnitXml.fromfile(junit)
    suites = {s.name: s for s in xml}
    good, bad = "data_parallel", "mutant.ag_reversed@data_parallel"
    if set(suites) != {good, bad}:
        fail(f"suites {sorted(suites)}")
    if suites[good].tests != 8 or suites[good].failures != 0:
        fail(f"{good}: {suites[good].tests} tests, {suites[good].failures} failures")
    if suites[bad].tests != 8 or suites[bad].failures < 1:
        fail(f"{bad}: {suites[bad].tests} tests, {suites[bad].failures} failures")
    if xml.tests != 16:
        fail(f"{xml.tests} tests in all")
    cases = cases_of(xml)
    forward = [r for r in cases[(bad, "forward")].result if isinstance(r, Failure)]
    if not forward or not forward[0].message.startswith("forward: "):
        fail(f"{bad} forward: no failure with a forward message: {cases[(bad, 'forward')].result}")
    if "; shape: " not in forward[0].message:
        fail(f"{bad} forward: no shape of the error in {forward[0].message!r}")
    if "replay: mpirun -n " not in (forward[0].text or ""):
        fail(f"{bad} forward: no replay line in {forward[0].text!r}")
    # --property leaves ledger out: skipped, never a pass.
    ledger = cases[(good, "ledger")].result
    if not ledger or not isinstance(ledger[0], Skipped) or ledger[0].message != "not selected":
        fail(f"{good} ledger: {ledger}, expected skipped 'not selected'")
    if cases[(good, "forward")].result:
        fail(f"{good} forward: {cases[(good, 'forward')].result}, expected a pass")

    with open(json_path, encoding="utf-8") as f:
        doc = json.load(f)
    if doc["schema"] != "shardcheck-verify/1" or doc["complete"] is not True:
        fail(f"schema {doc['schema']}, complete {doc['complete']}")
    if doc["summary"] != {"strategies": 2, "passed": 1, "failed": 1}:
        fail(f"summary {doc['summary']}")
    by_name = {s["name"]: s for s in doc["strategies"]}
    g, b = by_name[good], by_name[bad]
    if g["result"] != "pass" or g["cases"] != doc["cases_per_strategy"] or g["failures"]:
        fail(f"{good}: {g}")
    if not (g["memory"]["peak_bytes"] <= g["memory"]["bound_bytes"] and g["memory"]["peak_bytes"] > 0):
        fail(f"{good} memory {g['memory']}")
    if not 0 <= g["worst_error_ratio"] or g["seconds"] <= 0:
        fail(f"{good} worst error {g['worst_error_ratio']}, seconds {g['seconds']}")
    # The error figures per dtype × tensor × mode: a passing strategy within both tiers' bounds
    # (the statistical one is null in exact mode only); bf16 and f16 (shares of their windows)
    # beside f32 and f64.
    if not g["errors"]:
        fail(f"{good}: no error figures")
    if not {"f32", "f64", "bf16", "f16"} <= {e["dtype"] for e in g["errors"]}:
        fail(f"{good}: error figures of {sorted({e['dtype'] for e in g['errors']})} only")
    for e in g["errors"]:
        if e["dtype"] not in ("f32", "f64", "bf16", "f16") or e["tensor"] not in ("Y", "dX", "dW") or \
                not 0 <= e["err_u_mag"] or (e["mode"] != "exact") != (e["rigorous_share"] is not None) \
                or not 0 <= (e["rigorous_share"] or 0) <= 1 or not 0 <= (e["statistical_share"] or 0) <= 1:
            fail(f"{good} error figures {e}")
    if g["properties"]["ledger"] != "not selected" or g["properties"]["forward"] != "pass":
        fail(f"{good} properties {g['properties']}")
    f0 = b["failures"][0]
    if b["result"] != "fail" or f0["source"] != "generated" or "forward" not in f0["properties"]:
        fail(f"{bad}: {b}")
    if not f0["shape"] or f"; shape: {f0['shape']}" not in f0["message"]:
        fail(f"{bad}: shape {f0['shape']!r} for message {f0['message']!r}")
    if not f0["replay"].startswith("mpirun -n ") or f0["case"] not in f0["replay"]:
        fail(f"{bad} replay {f0['replay']!r} for case {f0['case']!r}")
    print("check_results.py: JUnit and JSON as expected")


def check_interrupted(junit, json_path, command):
    run = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(run.stdout)
    if run.returncode != 3:
        fail(f"verify exited {run.returncode}, expected 3 (the watchdog)")
    suites = [s.name for s in JUnitXml.fromfile(junit)]
    if suites != ["data_parallel"]:
        fail(f"suites {suites}, expected the finished data_parallel only")
    with open(json_path, encoding="utf-8") as f:
        doc = json.load(f)
    if doc["complete"] is not False or [s["name"] for s in doc["strategies"]] != ["data_parallel"]:
        fail(f"complete {doc['complete']}, strategies {doc['strategies']}")
    print("check_results.py: the interrupted run kept its finished strategy")


def check_hostile(junit):
    with open(junit + ".expected", encoding="utf-8") as f:
        expected = f.read()
    xml = JUnitXml.fromfile(junit)  # expat: rejects bad UTF-8 and forbidden characters
    cases = cases_of(xml)
    forward = [c for (s, n), c in cases.items() if n == "forward"]
    if len(forward) != 1 or not isinstance(forward[0].result[0], Failure):
        fail(f"forward testcases {forward}")
    if forward[0].result[0].message != expected:
        fail(f"message {forward[0].result[0].message!r}, expected {expected!r}")
    print("check_results.py: hostile text read back intact")


if __name__ == "__main__":
    if sys.argv[1] == "suite" and sys.argv[4] == "--":
        check_suite(sys.argv[2], sys.argv[3], sys.argv[5:])
    elif sys.argv[1] == "interrupted" and sys.argv[4] == "--":
        check_interrupted(sys.argv[2], sys.argv[3], sys.argv[5:])
    elif sys.argv[1] == "hostile":
        check_hostile(sys.argv[2])
    else:
        fail("usage: check_results.py suite JUNIT JSON -- COMMAND... | hostile JUNIT")
