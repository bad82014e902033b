#!/usr/bin/env python3
"""An executed plan's ops (twin execute's ops.csv) summed by kind and role on rank 0: how many ops of the step, the
measured time (medians over the measured iterations) and the predicted time, in ms per step and per op, and
measured / predicted. With ROLE arguments only those roles (e.g. qk_norm), else every (kind, role), largest
measured time first. With --trace, the predicted times are a `twin simulate` trace's instead (rank 0, by op name:
`twin simulate --plan-key` of the run's plan with another profile or binary re-prices a measured run without a GPU;
ops the trace lacks are left out).
Usage: python3 tests/gpu/ops_by_role.py [--trace TRACE.json] OPS_CSV [ROLE...]"""
import csv
import json
import sys


def trace_durations_ns(path):
    with open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    return {e["name"]: e["dur"] * 1e3 for e in events if e.get("ph") == "X" and e.get("pid") == 0}


def main(path, roles, trace=None):
    predicted_by_name = trace_durations_ns(trace) if trace else None
    totals = {}
    with open(path) as f:
        for row in csv.DictReader(f):
            if row["rank"] != "0" or (roles and row["role"] not in roles) or not row["measured_median_ns"]:
                continue
            if predicted_by_name is not None and row["name"] not in predicted_by_name:
                continue
            entry = totals.setdefault((row["kind"], row["role"]), [0, 0.0, 0.0])
            entry[0] += 1
            entry[1] += float(row["measured_median_ns"])
            entry[2] += (predicted_by_name[row["name"]] if predicted_by_name is not None
                         else float(row["predicted_duration_ns"]))
    print("| kind | role | ops | measured ms | predicted ms | per op measured us | per op predicted us | measured / predicted |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for (kind, role), (count, measured, predicted) in sorted(totals.items(), key=lambda item: -item[1][1]):
        ratio = f"{measured / predicted:.2f}" if predicted > 0 else "-"
        print(f"| {kind} | {role} | {count} | {measured / 1e6:.3f} | {predicted / 1e6:.3f} | "
              f"{measured / count / 1e3:.1f} | {predicted / count / 1e3:.1f} | {ratio} |")
    return 0 if totals else 1


if __name__ == "__main__":
    args = sys.argv[1:]
    trace = None
    if args[:1] == ["--trace"]:
        if len(args) < 2:
            sys.exit(__doc__)
        trace, args = args[1], args[2:]
    if not args:
        sys.exit(__doc__)
    sys.exit(main(args[0], set(args[1:]), trace))
