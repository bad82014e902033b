#!/usr/bin/env python3
"""Does a fold generalize? (issue 37 item 3: after folding runs of one model, a different model's runs on the same
machine improve, and none gets worse.) For each study of STUDIES (tools/one_h200_studies.py's folders), fold that
study's run 00 into PROFILE (`twin calibrate --from-trace RUN --profile PROFILE --out TMP`), then predict every run of
every study with the folded profile and with PROFILE (tools/repredict_runs.py's prediction; a run twin refuses to
fold, one of an older lowering_version, is named and skipped as a fold source), and print per folded
study: its own study's mean |error| before and after, the other studies' mean of means before and after, how many
other studies moved better or worse by more than 0.1 point, and the worst move. Ends with the mean over folds.
Usage: python3 tools/fold_transfer_study.py TWIN STUDIES PROFILE [--only STUDY,...] [--csv FILE]"""
import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from repredict_runs import finished_runs, measured_step_s, predicted_step_s  # noqa: E402

MOVED_POINTS = 0.1  # a study "moved" when its mean |error| changed by more than this many points


def study_errors(twin, studies, profile):
    """{study: mean |predicted / measured - 1| over its runs} with `profile`, in percent."""
    errors = {}
    for study, runs in studies.items():
        errs = []
        for run in runs:
            plan, measured = measured_step_s(run)
            predicted = predicted_step_s(twin, run, plan, profile)
            if predicted is None:
                raise SystemExit(f"{run}: twin simulate gave no prediction with {profile}")
            errs.append(abs(predicted / measured - 1))
        errors[study] = 100 * sum(errs) / len(errs)
    return errors


def fold(twin, run, profile, out):
    """Folds `run` into `profile`, written to `out`; the error line when twin refuses (a run of an older lowering)."""
    result = subprocess.run([twin, 'calibrate', '--from-trace', run, '--profile', profile, '--out', out],
                            capture_output=True, text=True)
    if result.returncode == 0:
        return None
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    return lines[-1] if lines else f"exit {result.returncode}"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('twin')
    parser.add_argument('studies')
    parser.add_argument('profile')
    parser.add_argument('--only', default='', help='fold only these studies (comma-separated); all are predicted')
    parser.add_argument('--csv', default='', help='write every (folded study, predicted study) pair here')
    args = parser.parse_args()
    studies = {name: finished_runs(os.path.join(args.studies, name, 'runs'))
               for name in sorted(os.listdir(args.studies)) if os.path.isdir(os.path.join(args.studies, name, 'runs'))}
    folded_ones = [s for s in studies if not args.only or s in args.only.split(',')]
    before = study_errors(args.twin, studies, args.profile)
    print(f"{'folded study':28s} {'own before':>10s} {'own after':>9s} {'others before':>13s} {'others after':>12s} "
          f"{'better':>6s} {'worse':>5s}  worst move")
    pairs, own_moves, other_moves = [], [], []
    for study in folded_ones:
        with tempfile.TemporaryDirectory() as tmp:
            folded = os.path.join(tmp, 'folded.json')
            refused = fold(args.twin, studies[study][0], args.profile, folded)
            if refused:
                print(f"{study:28s} not folded: {refused}")
                continue
            after = study_errors(args.twin, studies, folded)
        others = [s for s in studies if s != study]
        moves = {s: after[s] - before[s] for s in others}
        worst = max(others, key=lambda s: moves[s])
        mean_before = sum(before[s] for s in others) / len(others)
        mean_after = sum(after[s] for s in others) / len(others)
        print(f"{study:28s} {before[study]:9.2f}% {after[study]:8.2f}% {mean_before:12.2f}% {mean_after:11.2f}% "
              f"{sum(m < -MOVED_POINTS for m in moves.values()):6d} {sum(m > MOVED_POINTS for m in moves.values()):5d}"
              f"  {worst} {moves[worst]:+.2f}")
        own_moves.append(after[study] - before[study])
        other_moves.append(mean_after - mean_before)
        pairs += [(study, s, before[s], after[s]) for s in studies]
    if not own_moves:
        raise SystemExit("no study could be folded")
    print(f"mean over {len(own_moves)} folds: own study {sum(own_moves) / len(own_moves):+.2f} points, "
          f"the others' mean of means {sum(other_moves) / len(other_moves):+.2f} points")
    if args.csv:
        with open(args.csv, 'w') as f:
            f.write('folded_study,predicted_study,mean_abs_error_before_pct,mean_abs_error_after_pct\n')
            for folded_study, s, b, a in pairs:
                f.write(f"{folded_study},{s},{b:.3f},{a:.3f}\n")


if __name__ == '__main__':
    main()
