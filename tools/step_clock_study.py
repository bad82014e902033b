#!/usr/bin/env python3
"""The step clock twin predicts for archived twin execute runs against the clock their GPUs held. For each run folder
(metrics.json, scenario.json, gpu_clocks.csv) of RUNS_DIR: the median SM clock over the nvidia-smi samples of busy
GPUs (traces/gpu_clocks.hpp's rule: utilisation at least 90%) and the mean over rank classes of the clock
`SPDLOG_LEVEL=debug twin simulate --plan-key` logs for the run's plan with each PROFILE; then per profile the mean and max |error| (predicted / measured - 1).
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


# traces/gpu_clocks.hpp's rule, which `twin calibrate --from-trace` folds: a sample counts when its GPU's utilisation
# is at least kBusyUtilizationPercent; the clock is the median over every GPU's counted samples.
BUSY_UTILIZATION_PERCENT = 90


def measured_clock_MHz(run):
    """The run's gpu_clocks.csv (index, clocks.sm, power.draw, utilization.gpu, as tests/gpu/accuracy_study.py samples
    it), read as traces/gpu_clocks.cpp reads it; None when no sample is busy."""
    samples = []
    with open(os.path.join(run, 'gpu_clocks.csv')) as lines:
        for line in lines:
            fields = [f.strip() for f in line.split(',')]
            try:
                clock, utilization = float(fields[1]), float(fields[3])
            except (IndexError, ValueError):  # a line cut short, or a field nvidia-smi could not read
                continue
            if utilization >= BUSY_UTILIZATION_PERCENT and clock > 0:
                samples.append(clock)
    return statistics.median(samples) if samples else None


def simulate_debug_log(twin, run, profile, plan):
    """What `SPDLOG_LEVEL=debug twin simulate --plan-key` of the run's scenario with `profile` prints."""
    with tempfile.TemporaryDirectory() as out:
        result = subprocess.run([twin, 'simulate', os.path.join(run, 'scenario.json'), '--profile', profile,
                                 '--plan-key', plan, '--out', out, '--quiet', '--top', '0'],
                                capture_output=True, text=True, env=dict(os.environ, SPDLOG_LEVEL='debug'))
    return result.stdout + result.stderr


def predicted_clock_MHz(twin, run, profile, plan):
    clocks = [float(c) for c in re.findall(r'step clock of rank class \d+: (\d+) MHz',
                                           simulate_debug_log(twin, run, profile, plan))]
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
