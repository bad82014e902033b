#!/usr/bin/env python3
"""Fits attention's clock law (cost/sm_clock.hpp: time ~ clock^-e, forward and backward apart) on blind studies'
measured attention kernels, each study held out in turn (issue 37: nothing fitted without its held-out error).
For each candidate exponent E (one twin binary per E, built with cost/sm_clock.hpp stating E for both kinds), PROFILE's
attention timings are moved to E (tools/rescale_attention_clock.py) and every study's attention is priced
(tests/gpu/attention_kinds.py: rank 0's attention ops of every run, measured against the pinned plan's trace). log
(measured / priced) is interpolated linearly in E between candidates; a kind's exponent minimises the sum over the
fit studies of its square. Prints, per kind: the exponent on every fit study, and per study the exponent fitted
without it, its ratio at the law PROFILE carries (--stored), held out and in-sample. --exclude names studies priced
but never fitted on (e.g. one whose attention runs a variant calibration does not time).
Usage: python3 tools/attention_clock_fit.py --profile P [--stored F B] --candidate E=TWIN [...] [--exclude NAME]
       STUDY_WORK...   (STUDY_WORK: an accuracy study's folder with runs/*/ops.csv; NAME: its folder's name)"""
import argparse
import json
import math
import os
import sys
import tempfile

import clock_law
from rescale_attention_clock import rescale

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "gpu"))
from attention_kinds import attention_totals  # noqa: E402

KINDS = ("attention_forward", "attention_backward")


def log_ratios(twin, profile, work):
    """{kind: log(measured / priced)} of one study's attention (tests/gpu/attention_kinds.py's totals)."""
    return {kind: math.log(measured / priced)
            for kind, (measured, priced) in attention_totals(twin, profile, work).items() if kind in KINDS}


def at(points, e):
    """Linear interpolation (and extrapolation from the end segments) of sorted (E, value) points."""
    pairs = list(zip(points, points[1:]))
    for (e0, y0), (e1, y1) in pairs:
        if e <= e1 or (e1, y1) == points[-1]:
            return y0 + (y1 - y0) * (e - e0) / (e1 - e0)


def fit(table, kind, studies):
    grid = [x / 100 for x in range(0, 151)]
    return min(grid, key=lambda e: sum(at(table[s][kind], e) ** 2 for s in studies))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", required=True)
    parser.add_argument("--stored", nargs=2, type=float, metavar=("F", "B"))
    parser.add_argument("--candidate", action="append", required=True, metavar="E=TWIN")
    parser.add_argument("--exclude", action="append", default=[], metavar="NAME")
    parser.add_argument("studies", nargs="+")
    args = parser.parse_args()
    law = clock_law.exponents()
    stored = dict(zip(KINDS, args.stored or [law[k] for k in KINDS]))
    candidates = sorted((float(c.split("=", 1)[0]), c.split("=", 1)[1]) for c in args.candidate)
    if len(candidates) < 2:
        sys.exit("at least two candidate exponents are needed")
    names = [os.path.basename(w.rstrip("/")) for w in args.studies]
    table = {n: {k: [] for k in KINDS} for n in names}
    with tempfile.TemporaryDirectory() as scratch:
        for e, twin in candidates:
            with open(args.profile) as f:
                profile = json.load(f)
            rescale(profile, stored, {k: e for k in KINDS})
            path = os.path.join(scratch, f"profile-{e}.json")
            with open(path, "w") as f:
                json.dump(profile, f)
            for name, work in zip(names, args.studies):
                for kind, value in log_ratios(twin, path, work).items():
                    table[name][kind].append((e, value))
    fitted_on = [n for n in names if n not in args.exclude]
    for kind in KINDS:
        e_all = fit(table, kind, fitted_on)
        print(f"{kind}: e = {e_all:.2f} on {len(fitted_on)} studies; measured / priced per study:")
        print(f"  {'study':44s} {'e without it':>12s} {'at --stored':>11s} {'held out':>9s} {'in-sample':>9s}")
        held, before = [], []
        for n in names:
            e_out = fit(table, kind, [s for s in fitted_on if s != n])
            r_stored, r_out, r_in = (math.exp(at(table[n][kind], e)) for e in (stored[kind], e_out, e_all))
            mark = "" if n in fitted_on else "  (not fitted on)"
            print(f"  {n:44s} {e_out:12.2f} {r_stored:11.3f} {r_out:9.3f} {r_in:9.3f}{mark}")
            if n in fitted_on:
                held.append(abs(r_out - 1))
                before.append(abs(r_stored - 1))
        print(f"  mean |ratio - 1| over the fit studies: at --stored {sum(before) / len(before):.3f}, held out "
              f"{sum(held) / len(held):.3f} (max {max(held):.3f})")


if __name__ == "__main__":
    main()
