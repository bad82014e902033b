#!/usr/bin/env python3
"""Give a profile the sustained-clock curve (gpus[].sustained_clock) of several measurements of its GPU kind: at
each duty point the median clock over the measurements, each measurement's clock beside it (`gpu_sm_clock_MHz`),
and say so in provenance.sustained_clock_replaced.

Why: GPUs of one kind differ in the clock they hold under their power cap (H200s: 2-3% at a training step's GEMM
duty, docs/PROFILES.md "Shipped measured profiles"), so a profile shipped for any GPU of the kind prices at the
median of the GPUs measured, not at the one GPU its kernels were timed on.

A source is a profile (its GPU's `sustained_clock`) or a raw measurement file of tests/gpu/sustained_clock_check.sh
({"runs": [{"sustained_clock": ...}, ...]}, every run a measurement). Every source must have measured the same
duty points (four since 2026-11-28); the median duty is kept.

  python3 tools/replace_profile_clock_curve.py --into cost/profiles/h200-x1.json --why "..." SOURCE...
"""
import argparse
import json
import statistics
import sys

from profile_file import write_profile


def curves_of(path, gpu_name):
    with open(path) as f:
        document = json.load(f)
    if "runs" in document:
        return [run["sustained_clock"] for run in document["runs"]]
    return [g["sustained_clock"] for g in document["gpus"] if g["gpu"] == gpu_name and "sustained_clock" in g]


def median_curve(curves):
    counts = {len(c["points"]) for c in curves}
    if len(counts) != 1:
        sys.exit(f"the sources measured different numbers of duty points: {sorted(counts)}")
    points = []
    for i in range(counts.pop()):
        clocks = [c["points"][i]["sm_clock_MHz"] for c in curves]
        points.append({
            "gemm_duty": statistics.median(c["points"][i]["gemm_duty"] for c in curves),
            "sm_clock_MHz": statistics.median(clocks),
            "gpu_sm_clock_MHz": clocks,
        })
    return {"points": points}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--into", required=True, help="profile to update in place (atomically)")
    parser.add_argument("--why", required=True, help="the reason, recorded in provenance.sustained_clock_replaced")
    parser.add_argument("sources", nargs="+", help="profiles or raw curve measurements of the same GPU kind")
    args = parser.parse_args()
    with open(args.into) as f:
        target = json.load(f)
    if len(target["gpus"]) != 1:
        sys.exit(f"{args.into}: one GPU kind expected, found {len(target['gpus'])}")
    gpu = target["gpus"][0]
    curves, sources = [], []
    for path in args.sources:
        found = curves_of(path, gpu["gpu"])
        if not found:
            sys.exit(f"{path}: no sustained_clock of {gpu['gpu']}")
        curves += found
        sources += [path] * len(found)
    gpu["sustained_clock"] = median_curve(curves)
    target["provenance"]["sustained_clock_replaced"] = {"measurements": sources, "why": args.why}
    write_profile(target, args.into)
    print(f"{args.into}: the median of {len(curves)} sustained-clock curves:",
          ", ".join(f"{p['gemm_duty']:.2f}: {p['sm_clock_MHz']:.0f} MHz" for p in gpu["sustained_clock"]["points"]))


if __name__ == "__main__":
    main()
