#!/usr/bin/env python3
"""Fits a profile's gemm_rows_clock (cost/gemm_rows_clock.hpp) on archived one-GPU twin execute studies and reports
its held-out error, leaving one study out at a time.

For each run (metrics.json, scenario.json, gpu_clocks.csv) of each STUDY_RUNS_DIR: the clock its GPU held (the median
busy SM clock, as tools/step_clock_study.py reads it) and, from `SPDLOG_LEVEL=debug twin simulate --plan-key` with
PROFILE stripped of any gemm_rows_clock, the curve's clock for the plan and its GEMM rows (the rows carrying most of its
forward GEMMs' FLOPs: tokens per micro-batch). The residual r = ln(measured / curve) is fitted as

    r = level - exponent x ln(rows / reference_rows)

with the exponent from the contrasts inside each study (each study's own mean taken out: same GPU, same lease, so a
GPU's own clock offset cancels) and reference_rows the geometric mean of the runs' rows (fit() says why the level is
not fitted). Held out: each study predicted by the values fitted on the others, the clock's error within the study
(its own mean taken out, as the level is not modelled) printed beside the curve alone's.
With --steps, each study's steps are predicted too (tools/repredict_runs.py's measure) with PROFILE stripped and with
the values fitted without that study: the held-out error of step times. With --into P..., the values fitted on every
study are written into those profiles' GPUs of PROFILE's kind as their `gemm_rows_clock`, with the fit set and its
held-out error as its source.
Usage: python3 tools/gemm_rows_clock_fit.py TWIN PROFILE STUDY_RUNS_DIR... [--steps] [--into PROFILE...]"""
import glob
import json
import math
import os
import re
import statistics
import sys
import tempfile

from profile_file import write_profile
from repredict_runs import finished_runs, measured_step_s, predicted_step_s
from step_clock_study import measured_clock_MHz, simulate_debug_log


def curve_clock(twin, run, profile, plan):
    """The curve's clock (MHz) and the GEMM rows `twin simulate` logs for the plan's first rank class."""
    # Since 2026-12-06 the line names the GEMMs' clock by the load's throughput between the duty and the rows factor.
    found = re.search(r'step clock of rank class \d+: (\d+) MHz by the sustained-clock curve at GEMM duty [\d.]+, '
                      r'(?:[^,]*by the load\'s throughput[^,]*, )?x([\d.]+) for GEMM rows (\d+)',
                      simulate_debug_log(twin, run, profile, plan))
    if not found:
        return None
    return float(found.group(1)) / float(found.group(2)), float(found.group(3))


def without_rows_model(profile, folder):
    data = json.load(open(profile))
    for gpu in data['gpus']:
        gpu.pop('gemm_rows_clock', None)
    path = os.path.join(folder, 'profile.json')
    json.dump(data, open(path, 'w'))
    return path


def study_rows(twin, profile, runs_dir):
    rows = []
    for run in sorted(glob.glob(os.path.join(runs_dir, '*'))):
        if not all(os.path.exists(os.path.join(run, f)) for f in ('metrics.json', 'scenario.json', 'gpu_clocks.csv')):
            continue
        metrics = json.load(open(os.path.join(run, 'metrics.json')))
        measured = measured_clock_MHz(run)
        predicted = curve_clock(twin, run, profile, metrics['plan'])
        if metrics.get('world_size', 1) != 1 or not measured or not predicted:
            continue
        rows.append({'run': os.path.basename(run), 'residual': math.log(measured / predicted[0]),
                     'log_rows': math.log(predicted[1])})
    return rows


def within_exponent(studies):
    """The slope of the residual on ln(rows) with each study's means taken out, negated."""
    xs, ys = [], []
    for rows in studies.values():
        mx = statistics.mean(r['log_rows'] for r in rows)
        my = statistics.mean(r['residual'] for r in rows)
        xs += [r['log_rows'] - mx for r in rows]
        ys += [r['residual'] - my for r in rows]
    return -sum(x * y for x, y in zip(xs, ys)) / sum(x * x for x in xs)


def fit(studies):
    """The exponent from the contrasts inside each study; the reference rows the geometric mean of the runs' rows, so
    that the factor averages out over the fit set: the model moves a step by its rows relative to the steps the
    profile's prices and curve were checked on, and leaves their level alone (the curve's clock reads ~1% under these
    runs' on average, but their steps are priced within 0.3% on average: fitting the clock's level as well made every
    step 0.9% too fast, docs/ACCURACY.md "The step clock by GEMM rows")."""
    exponent = within_exponent(studies)
    log_reference = statistics.mean(r['log_rows'] for rows in studies.values() for r in rows)
    return exponent, math.exp(log_reference)


def write_into(paths, gpu, exponent, reference_rows, source):
    for path in paths:
        data = json.load(open(path))
        for entry in data['gpus']:
            if entry['gpu'] == gpu:
                entry['gemm_rows_clock'] = {'exponent': round(exponent, 4), 'reference_rows': round(reference_rows),
                                            'source': source}
        write_profile(data, path)
        print(f"wrote gemm_rows_clock into {path}")


def step_errors(twin, runs_dir, profile):
    """predicted / measured - 1 of every finished run's step with `profile`."""
    errors = []
    for run in finished_runs(runs_dir):
        plan, measured = measured_step_s(run)
        predicted = predicted_step_s(twin, run, plan, profile)
        if predicted:
            errors.append(predicted / measured - 1)
    return errors


def held_out_steps(twin, stripped, studies, folder):
    """Each study's steps without the key and with the values fitted on the other studies."""
    before, after = [], []
    for held in studies:
        exponent, reference_rows = fit({d: r for d, r in studies.items() if d != held})
        data = json.load(open(stripped))
        for entry in data['gpus']:
            entry['gemm_rows_clock'] = {'exponent': exponent, 'reference_rows': reference_rows, 'source': 'held out'}
        refitted = os.path.join(folder, 'refitted.json')
        json.dump(data, open(refitted, 'w'))
        b, a = step_errors(twin, held, stripped), step_errors(twin, held, refitted)
        before += b
        after += a
        print(f"{held[-70:]:70s} steps |error| {100 * statistics.mean(map(abs, b)):.2f}% -> "
              f"{100 * statistics.mean(map(abs, a)):.2f}%")
    print(f"held out, steps: |error| mean {100 * statistics.mean(map(abs, before)):.2f}% -> "
          f"{100 * statistics.mean(map(abs, after)):.2f}%, max {100 * max(map(abs, before)):.2f}% -> "
          f"{100 * max(map(abs, after)):.2f}% over {len(after)} runs")


def main():
    arguments = sys.argv[1:]
    into = arguments[arguments.index('--into') + 1:] if '--into' in arguments else []
    arguments = arguments[:arguments.index('--into')] if '--into' in arguments else arguments
    steps = '--steps' in arguments
    twin, profile, dirs = arguments[0], arguments[1], [a for a in arguments[2:] if a != '--steps']
    with tempfile.TemporaryDirectory() as folder:
        stripped = without_rows_model(profile, folder)
        studies = {d: rows for d in dirs if (rows := study_rows(twin, stripped, d))}
        if steps:
            held_out_steps(twin, stripped, studies, folder)
    exponent, reference_rows = fit(studies)
    print(f"fitted on {len(studies)} studies, {sum(len(r) for r in studies.values())} runs: exponent {exponent:.4f}, "
          f"reference_rows {reference_rows:.0f}")
    before, after = [], []
    for held, rows in studies.items():
        e, ref = fit({d: r for d, r in studies.items() if d != held})
        mean = statistics.mean(r['residual'] for r in rows)
        errors = [(abs(r['residual'] - mean),
                   abs(r['residual'] - mean + e * (r['log_rows'] - math.log(ref)) -
                       statistics.mean(e * (x['log_rows'] - math.log(ref)) for x in rows))) for r in rows]
        before += [b for b, _ in errors]
        after += [a for _, a in errors]
        print(f"{held[-70:]:70s} exponent {e:.4f} reference {ref:6.0f} rows  clock |error| "
              f"{100 * statistics.mean(b for b, _ in errors):.2f}% -> {100 * statistics.mean(a for _, a in errors):.2f}%")
    held_out = (f"clock |error| mean {100 * statistics.mean(before):.2f}% -> {100 * statistics.mean(after):.2f}%, "
                f"max {100 * max(before):.2f}% -> {100 * max(after):.2f}%")
    print(f"held out, every run, inside its study: {held_out}")
    if into:
        source = (f"fitted by tools/gemm_rows_clock_fit.py on {len(studies)} one-GPU twin execute studies "
                  f"({sum(len(r) for r in studies.values())} runs) against {os.path.basename(profile)}'s curve; "
                  f"each study held out in turn, inside the study: {held_out}")
        write_into(into, json.load(open(profile))['gpus'][0]['gpu'], exponent, reference_rows, source)


if __name__ == '__main__':
    main()
