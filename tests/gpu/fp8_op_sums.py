#!/usr/bin/env python3
"""Measured against predicted time per kind of op over one step of a `twin execute` run folder (its ops.csv): the FP8
GEMMs, the BF16 GEMMs, attention, the casts and the rest, summed over the step's ops (each op's measured median
against its price). An FP8 GEMM is told by its shape key in the plan (best.json: `inputs=`), else by the run's
fp8_cast ops preceding it being absent; here by the op name's role, as the plan lowers it: in an FP8 plan every
linear GEMM but the output projection (the LM head, kept in BF16) is FP8.
  python3 tests/gpu/fp8_op_sums.py RUN_DIR [RUN_DIR...]"""
import csv
import os
import sys
from collections import defaultdict


def kind_of(row, fp8_plan):
    if row["kind"] == "gemm":
        if fp8_plan and row["role"] != "output_projection":
            return "FP8 GEMMs"
        return "BF16 GEMMs"
    if row["kind"].startswith("attention"):
        return "attention"
    if row["kind"] == "fp8_cast":
        return "casts"
    return "other"


def main():
    for run in sys.argv[1:]:
        rows = list(csv.DictReader(open(os.path.join(run, "ops.csv"))))
        fp8_plan = any(r["kind"] == "fp8_cast" for r in rows)
        sums = defaultdict(lambda: [0.0, 0.0, 0])
        for r in rows:
            if not r["measured_median_ns"]:
                continue
            s = sums[kind_of(r, fp8_plan)]
            s[0] += float(r["predicted_duration_ns"])
            s[1] += float(r["measured_median_ns"])
            s[2] += 1
        print(f"{run}:")
        print("| kind | ops | predicted ms | measured ms | error |")
        print("|---|---|---|---|---|")
        for kind in ("FP8 GEMMs", "BF16 GEMMs", "attention", "casts", "other"):
            if kind in sums:
                p, m, n = sums[kind]
                print(f"| {kind} | {n} | {p / 1e6:.2f} | {m / 1e6:.2f} | {100 * (m / p - 1):+.2f}% |")


if __name__ == "__main__":
    main()
