#!/usr/bin/env python3
"""Which part of the predicted step, made longer or shorter, would lower the held-out error of the published table?

    python3 tools/validation_term_sensitivity.py --csv VAL/validation.csv [--table tests/validation/published.json]
        [--residuals RES/residuals.csv]

Reads the cross-validated run of `twin validate ... --cross-validate` (validation.csv: each row's predicted time split
into compute, exposed communication, pipeline bubble and optimizer, and the in-training factor of its fold) and, for
each trial, scales one term of every row, refits each GPU family's in-training factor on the other groups' rows
(the zero of the mean signed error, as the cross-validation does) and reports the leave-one-group-out mean and
largest |error|. Trials: exposed communication and the bubble scaled by 0 to 3, and a wait for the slowest of the
job's GPUs (compute x (1 + spread x E[largest of n normals]), Blom's approximation) at spreads of 0.5 to 3%; with
--residuals RES/residuals.csv (tools/validation_residuals.py), the attention or the memory-bound share of every row's
compute scaled (the shares of its first stage's compute stream).

The refit is linearised: a row's time is taken to move with the factor as its compute and bubble do (x f / f0),
which reproduces the run's own held-out figure within 0.05 point at the identity trial (the first line printed). A trial that lowers the figure is a candidate mechanism to lower and cross-validate in full, not a change.
"""
import argparse
import csv
import sys
import json
from statistics import NormalDist


def load(csv_path, table_path):
    table = {row["id"]: row for row in json.load(open(table_path))["rows"]}
    rows = []
    for r in csv.DictReader(open(csv_path)):
        if not r["predicted_iteration_s"]:
            continue
        nodes = table[r["id"]]["scenario"]["cluster"]["nodes"]
        family = gpu_family(nodes[0]["gpu"])
        fold = dict(kv.split("=") for kv in r["fold"].split(";"))
        if family + "_in_training" not in fold:  # no fitted parameter prices its GPUs: the row keeps its prediction
            continue
        rows.append(dict(id=r["id"], group=r["group"], family=family, published=float(r["published_iteration_s"]),
                         time=float(r["predicted_iteration_s"]), compute=float(r["compute_s"]),
                         exposed=float(r["exposed_communication_s"]), bubble=float(r["pipeline_bubble_s"]),
                         f0=float(fold[family + "_in_training"]),
                         gpus=sum(n["count"] * n["gpus_per_node"] for n in nodes)))
    return rows


def gpu_family(gpu):
    """As cost/profile.cpp's gpu_family names the families the fitted parameters price (cost/fitted_parameters.cpp)."""
    name = gpu.lower()
    if any(k in name for k in ("b200", "gb200", "gb300", "b300")):
        return "blackwell"
    if any(k in name for k in ("h100", "h200", "h800", "h20")):
        return "hopper"
    return "ampere" if any(k in name for k in ("a100", "a800", "a40", "a30", "a10")) else "other"


def largest_of(n):  # E[largest of n standard normals], Blom's approximation
    return NormalDist().inv_cdf((n - 0.375) / (n + 0.25)) if n > 1 else 0.0


def predicted(row, factor, exposed_scale=1.0, bubble_scale=1.0, spread=0.0, attention_scale=1.0, memory_scale=1.0):
    s = factor / row["f0"]
    kinds = 1 + row.get("attention_share", 0) * (attention_scale - 1) + row.get("memory_share", 0) * (memory_scale - 1)
    compute = row["compute"] * kinds * s * (1 + spread * largest_of(row["gpus"]))
    rest = row["time"] - row["compute"] - row["exposed"] - row["bubble"]
    return compute + exposed_scale * row["exposed"] + bubble_scale * row["bubble"] * s + rest


def folds(rows):
    """(group, family, held-out rows, training rows) of every group and GPU family with rows on both sides."""
    for group in sorted({r["group"] for r in rows}):
        for family in ("ampere", "hopper"):
            test = [r for r in rows if r["group"] == group and r["family"] == family]
            train = [r for r in rows if r["group"] != group and r["family"] == family]
            if test and train:
                yield group, family, test, train


def factor_for(train, **scales):
    """The in-training factor at which the training rows' mean signed error is zero (bisection), at `scales`
    (predicted()'s keyword arguments)."""
    lo, hi = 0.3, 3.0
    for _ in range(60):
        mid = (lo + hi) / 2
        mean = sum(predicted(r, mid, **scales) / r["published"] - 1 for r in train) / len(train)
        lo, hi = (mid, hi) if mean < 0 else (lo, mid)
    return (lo + hi) / 2


def abs_errors(rows, factor, **scales):
    return [abs(predicted(r, factor, **scales) / r["published"] - 1) for r in rows]


def held_out(rows, **scales):
    errors = []
    for group, family, test, train in folds(rows):
        errors += abs_errors(test, factor_for(train, **scales), **scales)
    return sum(errors) / len(errors), max(errors)


def held_out_memory_ratio(rows, families):
    """Leave one group out with a second parameter refitted in every fold beside the factor: the memory-bound
    share's ratio (0.6-2.1 in steps of 0.02) of the GPU families named, each fold taking the ratio whose factor
    (the zero of the mean signed error) gives the training rows the smallest mean |error|. Returns the mean and
    largest |error| and, per (group, family), the held-out mean |error| and the fold's factor and ratio."""
    grid = [0.6 + 0.02 * i for i in range(76)]
    errors, per_group = [], {}
    for group, family, test, train in folds(rows):
        best = None
        for m in (grid if family in families else [1.0]):
            f = factor_for(train, memory_scale=m)
            loss = sum(abs_errors(train, f, memory_scale=m)) / len(train)
            if best is None or loss < best[0]:
                best = (loss, f, m)
        _, f, m = best
        test_errors = abs_errors(test, f, memory_scale=m)
        errors += test_errors
        per_group[(group, family)] = (sum(test_errors) / len(test_errors), f, m)
    return sum(errors) / len(errors), max(errors), per_group


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", required=True)
    parser.add_argument("--table", default="tests/validation/published.json")
    parser.add_argument("--residuals", help="residuals.csv of tools/validation_residuals.py: adds trials that scale "
                                            "the attention or memory-bound share of every row's compute")
    args = parser.parse_args()
    rows = load(args.csv, args.table)
    if args.residuals:
        shares = {r["id"]: r for r in csv.DictReader(open(args.residuals))}
        missing = [row["id"] for row in rows if row["id"] not in shares]
        if missing:  # residuals.csv of another table, or rows it could not simulate alone: their shares are unknown
            sys.exit(f"{args.residuals} lacks {len(missing)} of the table's rows ({', '.join(missing[:3])}, ...): "
                     "run tools/validation_residuals.py on this validation.csv")
        for row in rows:
            row["attention_share"] = float(shares[row["id"]]["attention_share"])
            row["memory_share"] = float(shares[row["id"]]["memory_bound_share"])
    trials = [("as predicted", {})]
    trials += [(f"exposed communication x{k}", {"exposed_scale": k}) for k in (0, 0.5, 1.5, 2, 3)]
    trials += [(f"pipeline bubble x{k}", {"bubble_scale": k}) for k in (0.5, 1.5, 2)]
    trials += [(f"slowest GPU, spread {s:.1%}", {"spread": s}) for s in (0.005, 0.01, 0.02, 0.03)]
    if args.residuals:
        trials += [(f"attention x{k}", {"attention_scale": k}) for k in (0.7, 0.85, 1.15, 1.3)]
        trials += [(f"memory-bound x{k}", {"memory_scale": k}) for k in (0.7, 1.3, 1.6, 2.0)]
        trials += [("attention x0.7, memory-bound x1.6", {"attention_scale": 0.7, "memory_scale": 1.6})]
    print(f"{len(rows)} rows; held out (leave one group out), mean / largest |error|:")
    for name, kw in trials:
        mean, largest = held_out(rows, **kw)
        print(f"  {name:32s} {mean:7.2%} {largest:7.1%}")
    if not args.residuals:
        return
    # Beside the fixed scales above (a grid looked at over the whole table, so in-sample in its choice), the
    # memory-bound ratio refitted in every fold: a held-out figure of a second fitted parameter.
    for families in (("hopper",), ("ampere", "hopper")):
        mean, largest, per_group = held_out_memory_ratio(rows, families)
        print(f"  memory-bound ratio refitted per fold ({' and '.join(families)}): {mean:7.2%} {largest:7.1%}")
        for (group, family), (error, factor, ratio) in sorted(per_group.items()):
            if family in families:
                print(f"    {group:34s} {family:6s} {error:6.1%}  factor {factor:.3f}  ratio {ratio:.2f}")


if __name__ == "__main__":
    main()
