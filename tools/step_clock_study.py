#!/usr/bin/env python3
"""The step clock twin predicts for archived twin execute runs against the clock their GPUs held. For each run folder
(metrics.json, scenario.json, gpu_clocks.csv) of RUNS_DIR: the median SM clock over the nvidia-smi samples of busy GPUs
(utilization above 50%) and the mean over rank classes of the clock `SPDLOG_LEVEL=debug twin simulate --plan-key`
logs for the run's plan with each PROFILE; then per profile the mean and max |error| (predicted / measured - 1).
A run without a logged clock (a profile with no curve and no power model) prints '-'.
Usage: python3 tools/step_clock_study.py TWIN RUNS_DIR PROFILE..."""
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile


def measured_clock_MHz(run):
    """nvidia-smi's CSV as tests/gpu/ writes it: 'gpu, clock, power, utilization' or with a timestamp after the gpu."""
    samples = []
    with open(os.path.join(run, 'gpu_clocks.csv')) as lines:
        for line in lines:
            fields = [f.strip() for f in line.split(',')]
            if not fields[0].isdigit():
                continue
            clock, utilization = (fields[1], fields[3]) if len(fields) == 4 else (fields[2], fields[4])
            try:
                if float(utilization) > 50:
                    samples.append(float(clock))
            except ValueError:
                continue
    return statistics.median(samples) if samples else None


def predicted_clock_MHz(twin, run, profile, plan):
    with tempfile.TemporaryDirectory() as out:
        result = subprocess.run([twin, 'simulate', os.path.join(run, 'scenario.json'), '--profile', profile,
                                 '--plan-key', plan, '--out', out, '--quiet', '--top', '0'],
                                capture_output=True, text=True, env=dict(os.environ, SPDLOG_LEVEL='debug'))
    clocks = [float(c) for c in re.findall(r'step clock of rank class \d+: (\d+) MHz', result.stdout + result.stderr)]
    return statistics.mean(clocks) if clocks else None


def main():
    twin, runs_dir, profiles = sys.argv[1], sys.argv[2], sys.argv[3:]
    errors = {p: [] for p in profiles}
    for run in sorted(glob.glob(os.path.join(runs_dir, '*'))):
        if not all(os.path.exists(os.path.join(run, f)) for f in ('metrics.json', 'scenario.json', 'gpu_clocks.csv')):
            continue
        measured = measured_clock_MHz(run)
        if not measured:
            continue
        plan = json.load(open(os.path.join(run, 'metrics.json')))['plan']
        cells = []
        for p in profiles:
            predicted = predicted_clock_MHz(twin, run, p, plan)
            if predicted is None:
                cells.append('-')
                continue
            errors[p].append(predicted / measured - 1)
            cells.append(f"{predicted:.0f} ({100 * (predicted / measured - 1):+.1f}%)")
        print(f"{os.path.basename(run)[:60]:60s} {measured:.0f} MHz  " + "  ".join(cells))
    for p, e in errors.items():
        if e:
            print(p, f"clock mean |error| {100 * statistics.mean(abs(x) for x in e):.2f}% "
                     f"max {100 * max(abs(x) for x in e):.2f}% signed {100 * statistics.mean(e):+.2f}% over {len(e)} runs")


if __name__ == '__main__':
    main()
