#!/usr/bin/env python3
"""A run's measured op times against another profile's prices, kind by kind: for each RUN (a `twin execute` run
folder), `twin simulate --plan-key` prices the run's plan with PROFILE, and each op's predicted duration (best.json)
is set beside rank 0's measured median (ops.csv), summed per op kind over the runs. Prints per kind the measured and
predicted sums, the error (predicted / measured - 1), the kind's share of the measured op time and its contribution
to the total error. What `twin report` says for the run's own plan, for any profile.
Usage: python3 tools/kind_errors.py TWIN PROFILE RUN..."""
import collections
import csv
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from repredict_runs import measured_step_s, simulate_plan  # noqa: E402


def predicted_ops(twin, run, profile):
    """{op id ('c0.12'): (kind, predicted duration ns)} of the run's plan priced with `profile`."""
    plan, _ = measured_step_s(run)
    with tempfile.TemporaryDirectory() as out:
        result = simulate_plan(twin, os.path.join(run, 'scenario.json'), plan, out, profile)
        if result.returncode != 0:
            sys.exit(f"{run}: twin simulate failed: {(result.stdout + result.stderr).strip().splitlines()[-1:]}")
        with open(os.path.join(out, 'best.json')) as f:
            best = json.load(f)
    columns = best['op_columns']
    op_id, kind, duration = (columns.index(c) for c in ('op_id', 'kind', 'predicted_duration_ns'))
    return {op[op_id]: (op[kind], op[duration]) for rank_class in best['rank_classes'] for op in rank_class['ops']}


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    twin, profile, runs = sys.argv[1], sys.argv[2], sys.argv[3:]
    sums = collections.defaultdict(lambda: [0.0, 0.0])  # kind: [measured ns, predicted ns]
    for run in runs:
        predicted = predicted_ops(twin, run, profile)
        with open(os.path.join(run, 'ops.csv')) as f:
            for row in csv.DictReader(f):
                found = predicted.get(f"c{row['rank_class']}.{row['op_id']}")
                if row['rank'] != '0' or not row['measured_median_ns'] or found is None:
                    continue
                sums[found[0]][0] += float(row['measured_median_ns'])
                sums[found[0]][1] += found[1]
    measured_all = sum(m for m, _ in sums.values())
    predicted_all = sum(p for _, p in sums.values())
    for kind, (m, p) in sorted(sums.items(), key=lambda item: -item[1][0]):
        print(f"{kind:22s} measured {m / 1e6:9.1f} ms  predicted {p / 1e6:9.1f} ms  {100 * (p / m - 1):+6.1f}%  "
              f"share {100 * m / measured_all:5.1f}%  contribution {100 * (p - m) / measured_all:+.2f}%")
    print(f"{'all ops':22s} measured {measured_all / 1e6:9.1f} ms  predicted {predicted_all / 1e6:9.1f} ms  "
          f"{100 * (predicted_all / measured_all - 1):+6.1f}%")


if __name__ == '__main__':
    main()
