#!/usr/bin/env python3
"""Loss, gradient norm and learning rate per step of twin execute runs, side by side (measured/rank0.json, full
precision), with the first step at which each run's loss differs from the first run's in any bit.
Usage: loss_spike_table.py RUN_DIR...           (missing folders are left out)
       loss_spike_table.py --same RUN_A RUN_B   (exit 0 when both ran and their losses are bit-identical)"""
import json, os, sys


def steps_of(run):
    path = os.path.join(run, "measured", "rank0.json")
    if not os.path.exists(path):
        return None
    d = json.load(open(path))
    n = len(d["losses"])
    return {"loss": d["losses"], "grad_norm": d.get("grad_norms", [None] * n), "lr": d.get("learning_rates", [None] * n)}


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i + 1
    return None if len(a) == len(b) else min(len(a), len(b)) + 1


def main(argv):
    if argv[:1] == ["--same"]:
        a, b = steps_of(argv[1]), steps_of(argv[2])
        same = a is not None and b is not None and first_difference(a["loss"], b["loss"]) is None
        print(f"{argv[1]} and {argv[2]}: {'bit-identical losses' if same else 'differ'}")
        return 0 if same else 1
    runs = [(os.path.basename(r.rstrip("/")), steps_of(r)) for r in argv]
    runs = [(name, s) for name, s in runs if s]
    if not runs:
        print("no runs")
        return 1
    print("| step | " + " | ".join(f"{n} loss | {n} grad norm | {n} lr" for n, _ in runs) + " |")
    print("|---" * (1 + 3 * len(runs)) + "|")
    fmt = lambda v, spec: "" if v is None else format(v, spec)
    for i in range(max(len(s["loss"]) for _, s in runs)):
        cells = []
        for _, s in runs:
            at = lambda key: s[key][i] if i < len(s[key]) else None
            cells += [fmt(at("loss"), ".6f"), fmt(at("grad_norm"), ".3f"), fmt(at("lr"), ".3g")]
        print(f"| {i + 1} | " + " | ".join(cells) + " |")
    base = runs[0][1]["loss"]
    for name, s in runs[1:]:
        step = first_difference(base, s["loss"])
        print(f"{name} against {runs[0][0]}: " + ("bit-identical" if step is None else f"first differs at step {step}"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
