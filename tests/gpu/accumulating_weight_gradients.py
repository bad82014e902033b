#!/usr/bin/env python3
"""Weight gradients that accumulate against those that do not, in `twin execute` runs: rank 0's backward GEMMs of
each (layer, micro-batch, linear) come as the data gradient, then the weight gradient (the lowering's order); the
first micro-batch's weight gradient writes its buffer (beta 0, as calibration times every GEMM), each later one adds
to it (beta 1). Prints, per run, measured over priced time of each group's weight gradients.
    python3 tests/gpu/accumulating_weight_gradients.py RUN...   (RUN: a run folder with ops.csv)"""
import collections
import csv
import os
import sys


def ratios(run):
    pairs = collections.defaultdict(list)
    with open(os.path.join(run, "ops.csv")) as f:
        for row in csv.DictReader(f):
            if row["rank"] == "0" and row["kind"] == "gemm" and row["phase"] == "backward" and row["layer"] != "-1":
                pairs[(row["layer"], row["micro_batch"], row["role"])].append(row)
    sums = {True: [0.0, 0.0, 0], False: [0.0, 0.0, 0]}  # first micro-batch or not: measured, priced, count
    for (_, micro_batch, _), rows in pairs.items():
        if len(rows) != 2:  # a linear without a weight gradient here, or one the lowering split otherwise
            continue
        first = micro_batch == "0"
        sums[first][0] += float(rows[1]["measured_median_ns"])
        sums[first][1] += float(rows[1]["predicted_duration_ns"])
        sums[first][2] += 1
    return sums


def main(runs):
    print("| run | first micro-batch: weight gradients, measured / priced | later ones (accumulating) | ratio |")
    print("| --- | --- | --- | --- |")
    for run in runs:
        s = ratios(run)
        if not s[True][2] or not s[False][2]:
            print(f"| {run} | (needs two micro-batches or more) | | |")
            continue
        first, later = s[True][0] / s[True][1], s[False][0] / s[False][1]
        print(f"| {run} | {first:.3f} ({s[True][2]}) | {later:.3f} ({s[False][2]}) | {later / first:.3f} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
