#!/usr/bin/env python3
"""Where an op's time goes between its kernels: for each op whose name (ops.csv) matches PATTERN in a twin execute run
folder's measured/rank<r>.json (CUPTI kernels joined to ops), per measured iteration (after the warm-up), its kernel count, the sum of
its kernels' durations, its span (first start to last end) and the idle time inside the span; then the medians
over the matching ops. An op whose span is mostly idle waited on its host (launches issued more slowly than the GPU
ran them, or waited behind other streams' kernels: the kernels of other ops that ran inside the span are summed by
name (their first 40 characters), so the two can be told apart); one whose span is its kernels' sum ran slower
kernels.
Usage: op_kernel_gaps.py RUN_DIR PATTERN [RANK]"""
import csv
import json
import re
import statistics
import sys


def main():
    run, pattern, rank = sys.argv[1], re.compile(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else "0"
    d = json.load(open(f"{run}/measured/rank{rank}.json"))
    k = d["kernels"]
    kernel_names = d["kernel_names"]
    names = {int(r["op_id"]): r["name"] for r in csv.DictReader(open(f"{run}/ops.csv")) if r["rank"] == rank}
    ops = {}
    every = []  # (start, end, op, name) of every kernel, for what ran beside an op
    for i in range(len(k["start_ns"])):
        every.append((k["start_ns"][i], k["end_ns"][i], k["op"][i], kernel_names[k["name"][i]][:40]))
        if k["iteration"][i] < d["warmup_iterations"] or k["op"][i] < 0:
            continue
        ops.setdefault((k["iteration"][i], k["op"][i]), []).append((k["start_ns"][i], k["end_ns"][i]))
    every.sort()
    rows = []
    for (iteration, op), kernels in sorted(ops.items()):
        name = names.get(op, str(op))
        if not pattern.search(name):
            continue
        kernels.sort()
        busy = sum(e - s for s, e in kernels)
        span = kernels[-1][1] - kernels[0][0]
        beside = {}
        first, last = kernels[0][0], kernels[-1][1]
        for start, end, other, kernel in every:
            if start >= last:
                break
            if other != op and end > first:
                beside[kernel] = beside.get(kernel, 0) + min(end, last) - max(start, first)
        rows.append((name, iteration, len(kernels), busy, span, beside))
    for name, iteration, count, busy, span, beside in rows[:12]:
        others = ", ".join(f"{kernel} {ns / 1e3:.0f} us" for kernel, ns in sorted(beside.items(), key=lambda b: -b[1])[:3])
        print(f"{name:36s} it {iteration} kernels {count:3d} busy {busy / 1e3:8.1f} us span {span / 1e3:8.1f} us "
              f"idle {(span - busy) / 1e3:8.1f} us; beside: {others or 'nothing'}")
    if rows:
        print(f"median over {len(rows)}: kernels {statistics.median(r[2] for r in rows)}, busy "
              f"{statistics.median(r[3] for r in rows) / 1e3:.1f} us, span {statistics.median(r[4] for r in rows) / 1e3:.1f} us")


if __name__ == "__main__":
    main()
