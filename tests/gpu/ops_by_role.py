#!/usr/bin/env python3
"""An executed plan's ops (twin execute's ops.csv) summed by kind and role on rank 0: how many ops of the step, the
measured time (medians over the measured iterations) and the predicted time, in ms per step and per op, and
measured / predicted. With ROLE arguments only those roles (e.g. qk_norm), else every (kind, role), largest
measured time first. Usage: python3 tests/gpu/ops_by_role.py OPS_CSV [ROLE...]"""
import csv
import sys


def main(path, roles):
    totals = {}
    with open(path) as f:
        for row in csv.DictReader(f):
            if row["rank"] != "0" or (roles and row["role"] not in roles) or not row["measured_median_ns"]:
                continue
            entry = totals.setdefault((row["kind"], row["role"]), [0, 0.0, 0.0])
            entry[0] += 1
            entry[1] += float(row["measured_median_ns"])
            entry[2] += float(row["predicted_duration_ns"])
    print("| kind | role | ops | measured ms | predicted ms | per op measured us | per op predicted us | measured / predicted |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for (kind, role), (count, measured, predicted) in sorted(totals.items(), key=lambda item: -item[1][1]):
        ratio = f"{measured / predicted:.2f}" if predicted > 0 else "-"
        print(f"| {kind} | {role} | {count} | {measured / 1e6:.3f} | {predicted / 1e6:.3f} | "
              f"{measured / count / 1e3:.1f} | {predicted / count / 1e3:.1f} | {ratio} |")
    return 0 if totals else 1


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], set(sys.argv[2:])))
