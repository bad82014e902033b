#!/usr/bin/env python3
"""Each op kind's predicted time in a `twin simulate` trace against what a `twin execute` run measured for it.

Re-prices a run that was measured earlier, without a GPU: simulate the run's plan (--plan-key) with the profile or
binary under test, then sum, per (kind, role, phase), the trace's durations of rank 0 and the run's ops.csv medians
of the same op names. The measured side is the run's; nothing is fitted.

Usage: python3 tools/ops_against_run.py TRACE.json RUN/ops.csv [TOP]
"""
import collections
import csv
import json
import sys


def main(trace_path, ops_path, top):
    with open(trace_path) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    predicted = {e["name"]: e["dur"] * 1e3 for e in events if e.get("ph") == "X" and e.get("pid") == 0}
    sums = collections.defaultdict(lambda: [0, 0.0, 0.0])
    with open(ops_path) as f:
        for row in csv.DictReader(f):
            if row["rank"] != "0" or not row["measured_median_ns"] or row["name"] not in predicted:
                continue
            s = sums[(row["kind"], row["role"], row["phase"])]
            s[0] += 1
            s[1] += predicted[row["name"]]
            s[2] += float(row["measured_median_ns"])
    total_predicted = sum(s[1] for s in sums.values())
    total_measured = sum(s[2] for s in sums.values())
    if total_predicted <= 0:
        sys.exit(f"{ops_path}: no op of rank 0 matches the trace's names")
    print(f"sum of ops: predicted {total_predicted / 1e6:.2f} ms, measured {total_measured / 1e6:.2f} ms "
          f"(measured / predicted {total_measured / total_predicted:.3f})")
    for key, (n, p, m) in sorted(sums.items(), key=lambda item: -item[1][2])[:top]:
        print(f"{'/'.join(key):44s} n={n:3d}  predicted {p / 1e6:8.3f} ms  measured {m / 1e6:8.3f} ms  "
              f"measured / predicted {m / p:.2f}")


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) == 4 else 12)
