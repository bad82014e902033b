#!/usr/bin/env python3
"""Compares the twin execute runs under two folders (the same checks before and after a change): every run
folder's metrics.json under BEFORE that has a counterpart at the same place under AFTER: loss of every step
bit for bit, and the median step time. Prints a Markdown table. Usage: compare_runs.py BEFORE AFTER (tests/gpu/before_after_check.sh)"""
import json, os, sys


def runs(root):
    found = {}
    for folder, _, names in os.walk(root):
        if "metrics.json" in names:
            found[os.path.relpath(folder, root)] = json.load(open(os.path.join(folder, "metrics.json")))
    return found


def losses(metrics):
    return [step["loss"] for step in metrics.get("steps", [])]


def median_step_s(metrics):
    return (metrics.get("measured") or {}).get("iteration_s")


def main():
    before, after = runs(sys.argv[1]), runs(sys.argv[2])
    print("| run | steps | losses bit-identical | first differing step | step s before | step s after | after/before |")
    print("|---|---|---|---|---|---|---|")
    identical = 0
    for name in sorted(before):
        if name not in after:
            print(f"| {name} | | missing after | | | | |")
            continue
        a, b = losses(before[name]), losses(after[name])
        same = a == b and len(a) > 0
        identical += same
        first = next((i + 1 for i, (x, y) in enumerate(zip(a, b)) if x != y), "")
        ta, tb = median_step_s(before[name]), median_step_s(after[name])
        ratio = f"{tb / ta:.3f}" if ta and tb else ""
        fmt = lambda t: f"{t:.4f}" if t else ""
        print(f"| {name} | {len(a)} | {'yes' if same else 'NO'} | {first} | {fmt(ta)} | {fmt(tb)} | {ratio} |")
    print(f"\n{identical} of {len(before)} runs with bit-identical losses")


if __name__ == "__main__":
    main()
