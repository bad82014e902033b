#!/usr/bin/env python3
"""Re-predict archived twin execute runs (each run folder: metrics.json with its plan key, scenario.json; the step of untraced/metrics.json
where the study ran the plan a second time without CUPTI's records) with one or more profiles:
each run's plan simulated with `--plan-key`, its measured step time beside each prediction, then mean and max
|error| (predicted / measured - 1), the signed mean and Kendall's tau-b of predicted against measured per profile.
Usage: python3 tools/repredict_runs.py TWIN RUNS_DIR PROFILE..."""
import csv
import glob
import json
import os
import subprocess
import sys
import tempfile


def tau_b(xs, ys):
    """Kendall's tau-b: concordant minus discordant pairs over the pairs not tied in each variable."""
    concordant = discordant = tied_x = tied_y = 0
    for i in range(len(xs)):
        for j in range(i + 1, len(xs)):
            dx, dy = xs[i] - xs[j], ys[i] - ys[j]
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                tied_x += 1
            elif dy == 0:
                tied_y += 1
            elif (dx > 0) == (dy > 0):
                concordant += 1
            else:
                discordant += 1
    denominator = ((concordant + discordant + tied_x) * (concordant + discordant + tied_y)) ** 0.5
    return (concordant - discordant) / denominator if denominator else float('nan')


def measured_step_s(run):
    """The run's plan key and measured step: the untraced run's where the study ran one (tests/gpu/accuracy_study.py;
    its plan is the traced run's), else the traced run's."""
    metrics_of_run = json.load(open(os.path.join(run, 'metrics.json')))
    plan = metrics_of_run.get('plan', metrics_of_run.get('strategy'))  # 'strategy' in runs before 2026-11-25
    if not isinstance(plan, str):
        raise SystemExit(f"{run}/metrics.json: expected a plan key at /plan (or /strategy in older runs)")
    untraced = os.path.join(run, 'untraced', 'metrics.json')
    metrics = untraced if os.path.exists(untraced) else os.path.join(run, 'metrics.json')
    return plan, json.load(open(metrics))['measured']['iteration_s']


def simulate_plan(twin, scenario, plan, out, profile=None):
    """`twin simulate --plan-key` of `scenario` into `out` (with `profile`, else the scenario's own); its result."""
    return subprocess.run([twin, 'simulate', scenario, '--plan-key', plan, '--out', out, '--quiet', '--top', '0'] +
                          (['--profile', profile] if profile else []), capture_output=True, text=True)


def plan_step_s(twin, scenario, plan, profile=None):
    """`twin simulate --plan-key` of `scenario` (with `profile`, else the scenario's own): the plan's predicted step,
    or None."""
    with tempfile.TemporaryDirectory() as out:
        simulate_plan(twin, scenario, plan, out, profile)
        ranking = os.path.join(out, 'ranking.csv')
        if not os.path.exists(ranking):
            return None
        for row in csv.DictReader(open(ranking)):
            if row['strategy'] == plan:
                return float(row['iteration_time_s'])
    return None


def predicted_step_s(twin, run, plan, profile):
    """The run's scenario with `profile`: its plan's predicted step, or None."""
    return plan_step_s(twin, os.path.join(run, 'scenario.json'), plan, profile)


def finished_runs(runs_dir):
    """The run folders with a metrics.json, in name order; the others named on stderr."""
    runs = []
    for run in sorted(glob.glob(os.path.join(runs_dir, '*'))):
        if os.path.exists(os.path.join(run, 'metrics.json')):
            runs.append(run)
        else:
            print(f"{os.path.basename(run)}: no metrics.json (the run did not finish), left out", file=sys.stderr)
    return runs


def main():
    twin, runs_dir, profiles = sys.argv[1], sys.argv[2], sys.argv[3:]
    rows = []
    for run in finished_runs(runs_dir):
        plan, meas = measured_step_s(run)
        rows.append((os.path.basename(run), meas, [predicted_step_s(twin, run, plan, p) for p in profiles]))
    for name, meas, preds in rows:
        print(f"{name[:60]:60s} {meas:.4f} " +
              " ".join(f"{p:.4f} ({(p/meas-1)*100:+.1f}%)" if p is not None else "not simulated" for p in preds))
    for i, p in enumerate(profiles):
        missing = [r[0] for r in rows if r[2][i] is None]
        if missing:  # e.g. a profile without the runs' GPU: `twin simulate` refused the scenario
            print(p, f"could not price {len(missing)} of {len(rows)} runs ({missing[0]} first): "
                     "run `twin simulate --plan-key` on one to see why")
            continue
        signed = [r[2][i] / r[1] - 1 for r in rows]
        errs = [abs(e) for e in signed]
        tau = tau_b([r[1] for r in rows], [r[2][i] for r in rows])
        print(p, f"mean |error| {100*sum(errs)/len(errs):.2f}% max {100*max(errs):.2f}% signed "
                 f"{100*sum(signed)/len(signed):+.2f}% tau-b {tau:.3f}")


if __name__ == '__main__':
    main()
