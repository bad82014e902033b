#!/usr/bin/env python3
"""tools/graft_profile_kernels.py --part revised: a memory-bound kind whose kernel revision differs takes the source's
entries and revision (its traced entries dropped with it), every other entry stays, a revised kind that follows the
SM clock is refused, --part capped adds the source's capped losses the target lacks, and provenance.grafted keeps one
record per part in order. Usage: graft_profile_kernels_test.py"""
import json
import os
import subprocess
import sys
import tempfile

TOOLS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tools")
sys.path.insert(0, TOOLS)
from graft_profile_kernels import graft_added, graft_capped, graft_revised  # noqa: E402

PERMUTE = "moe_permute:bytes=33554432"
GEMM = "gemm:m=4096,n=4096,k=4096,count=1,ta=0,tb=0"


def profile(revisions, measured):
    return {"gpus": [{"gpu": "H200-141GB", "reference_sm_clock_MHz": 1700.0, "measured": measured}],
            "provenance": {"kernel_revisions": revisions, "command": "twin calibrate", "date_utc": "2026-11-30"}}


def entry(ns, source=None):
    e = {"median_ns": ns, "p10_ns": ns, "p90_ns": ns, "samples": 5}
    if source:
        e["source"] = source
        e["priced_ns"] = ns
    return e


def check(condition, what):
    if not condition:
        sys.exit("FAILED: " + what)


def main():
    source = profile({"moe_permute": 2, "gemm": 1}, {PERMUTE: entry(8000.0), GEMM: entry(100000.0)})
    target = profile({"gemm": 1}, {PERMUTE: entry(46000.0), "moe_permute:bytes=1024": entry(900.0, "trace:run"),
                                   GEMM: entry(120000.0)})
    what = graft_revised(source, target)
    measured = target["gpus"][0]["measured"]
    check(measured[PERMUTE]["median_ns"] == 8000.0, "the permute entry is the source's")
    check("moe_permute:bytes=1024" not in measured, "the traced entry of the old kernel is dropped")
    check(measured[GEMM]["median_ns"] == 120000.0, "a kind of the same revision keeps the target's entry")
    check(target["provenance"]["kernel_revisions"]["moe_permute"] == 2, "the target records the source's revision")
    check("moe_permute" in what, what)

    clocked = profile({"gemm": 2}, {GEMM: entry(90000.0)})
    try:
        graft_revised(clocked, profile({}, {GEMM: entry(120000.0)}))
        sys.exit("FAILED: a revised GEMM was grafted without its clock law")
    except SystemExit as e:
        check("follow the SM clock" in str(e), str(e))

    capped, plain = "loss_forward:rows=4096,cols=64128,softcap=1", "loss_forward:rows=4096,cols=64128"
    source = profile({}, {capped: entry(420000.0), plain: entry(157000.0),
                          "loss_forward:rows=8,cols=64,softcap=1": entry(5.0, "trace:run")})
    target = profile({}, {plain: entry(160000.0), capped: entry(400000.0),
                          "loss_backward:rows=8,cols=64,softcap=1": entry(7.0, "trace:run")})
    for p, clock in ((source, 1800.0), (target, 1600.0)):
        p["gpus"][0]["reference_sm_clock_MHz"] = clock
        p["gpus"][0]["attention_at_reference_clock"] = True
    what = graft_capped(source, target)
    measured = target["gpus"][0]["measured"]
    check(abs(measured[capped]["median_ns"] - 420000.0 * 1800 / 1600) < 1e-6,
          "the capped loss is the source's, moved to the target's reference clock by exponent 1")
    check(measured[plain]["median_ns"] == 160000.0, "the target's plain loss stays")
    check("loss_forward:rows=8,cols=64,softcap=1" not in measured, "a traced capped entry is not grafted")
    check(measured["loss_backward:rows=8,cols=64,softcap=1"]["median_ns"] == 7.0, "the target's traced entry stays")
    check(what == "1 soft-capped loss entries replaced by 1 of the source's, moved by their clock law", what)
    try:
        graft_capped(profile({}, {capped: entry(1.0)}), profile({}, {}))
        sys.exit("FAILED: capped losses grafted from a profile whose clocked kernels are at no stated clock")
    except SystemExit as e:
        check("reference clock" in str(e), str(e))
    try:
        graft_added(source, profile({}, {}), ["softcap=1"])
        sys.exit("FAILED: a capped loss was added as timed")
    except SystemExit as e:
        check("follow the SM clock" in str(e), str(e))

    try:
        graft_added(profile({}, {GEMM: entry(90000.0)}), profile({}, {}), ["gemm:"])
        sys.exit("FAILED: a GEMM was added without its clock law")
    except SystemExit as e:
        check("follow the SM clock" in str(e), str(e))

    with tempfile.TemporaryDirectory() as folder:
        paths = {name: os.path.join(folder, name + ".json") for name in ("source", "target")}
        json.dump(profile({"moe_permute": 2}, {PERMUTE: entry(8000.0)}), open(paths["source"], "w"))
        earlier = profile({}, {PERMUTE: entry(46000.0)})
        earlier["provenance"]["grafted"] = {"part": "attention", "what": "an earlier graft"}
        json.dump(earlier, open(paths["target"], "w"))
        for _ in range(2):  # the same part twice: one record for it
            subprocess.run([sys.executable, os.path.join(TOOLS, "graft_profile_kernels.py"), "--part", "revised",
                            "--source", paths["source"], "--into", paths["target"], "--out", paths["target"],
                            "--why", "test"], check=True, capture_output=True)
        grafted = json.load(open(paths["target"]))["provenance"]["grafted"]
        check([g["part"] for g in grafted] == ["attention", "revised"], json.dumps(grafted))
    print("graft_profile_kernels: revised kinds grafted, clocked kinds refused, capped losses added, one record per part")


if __name__ == "__main__":
    main()
