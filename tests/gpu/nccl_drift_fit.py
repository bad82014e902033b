#!/usr/bin/env python3
"""Ranks that drift apart between the moments their compute is aligned, and the collective that waits for the
last of them (issue 37): the measurement behind sim/rank_drift.hpp's parameters. Reads the run folders of
accuracy studies (nccl_kernels.csv.gz, ops.csv; tests/gpu/nccl_arrival_skew.py says what they hold); no GPU.

Every TP and DP collective instance (iteration, op, group of ranks R, n = |R|) gives
  lateness L = last rank's kernel start - the mean start of R (what a simulator that replays one representative
               rank, arriving at the mean, misses: the collective starts when the last arrives);
  drift time T = the mean start - the last moment R's compute streams were aligned: the end of the latest
               collective whose result the compute waits on (tp_gather, tp_scatter, param_gather) over R or a
               superset of R, or the iteration's start (every rank waited for the last step's optimizer).
               Gradient reductions run on a side stream beside the backward: they delay, but do not align.
The model (sim/rank_drift.hpp): L = e_n (a + b T), e_n = E[max of n standard normals] - 0 (the mean), i.e. each
rank's arrival after the aligned moment is T (1 + b' z) + a' z with independent z: `a` the fixed part (launch and
host jitter, in ns), `b` the rate (the relative spread of the ranks' compute speeds). Fitted per study as:
  a = the mean of L / e_n over the instances with T < 1 ms (only the fixed part shows there);
  b = sum of (L / e_n - a) / sum of T over the instances with T >= 10 ms (the rate dominates there).
Means, not medians: the simulator adds the expected lateness.
--fit-on names the study whose instances fit a and b; every study is then predicted with them, per run and role:
mean measured L against the mean of e_n (a + b T) over the same instances, and the sum per iteration.
Usage: nccl_drift_fit.py --fit-on NAME NAME=WORK_DIR... [--json OUT]
"""
import argparse, collections, csv, functools, gzip, json, math, os, statistics, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nccl_arrival_skew import load_ops, merged_instances  # noqa: E402

ALIGNING_ROLES = ("tp_gather", "tp_scatter", "param_gather")
FIXED_BELOW_NS = 1e6
RATE_FROM_NS = 10e6


@functools.lru_cache(maxsize=None)
def expected_max_of_normals(n):
    """E[max of n standard normals], exact by numerical integration (n <= 2: closed form)."""
    if n <= 1:
        return 0.0
    pdf = lambda x: math.exp(-x * x / 2) / math.sqrt(2 * math.pi)
    cdf = lambda x: 0.5 * (1 + math.erf(x / math.sqrt(2)))
    step, total, x = 1e-3, 0.0, -10.0
    while x < 10.0:
        total += x * n * pdf(x) * cdf(x) ** (n - 1) * step
        x += step
    return total


def iteration_starts(run):
    """{(rank, iteration): first kernel start}."""
    starts = {}
    with gzip.open(os.path.join(run, "nccl_kernels.csv.gz"), "rt") as f:
        for row in csv.DictReader(f):
            if row["kind"] == "iteration":
                starts[(int(row["rank"]), int(row["iteration"]))] = int(row["start_ns"])
    return starts


def samples(run):
    """[(role, n, T_ns, L_ns, iteration)] of every TP/DP collective instance with at least two ranks."""
    ops = load_ops(run)
    merged = merged_instances(run, ops)
    begin = iteration_starts(run)
    aligned = {}  # frozenset of ranks -> end of the last aligning collective over them
    out = []
    for key in sorted(merged, key=lambda k: (k[0], statistics.mean(s for s, _ in merged[k].values()))):
        iteration, cls, op, _, _ = key
        by_rank = merged[key]
        ranks = frozenset(by_rank)
        starts = [s for s, _ in by_rank.values()]
        mean = statistics.mean(starts)
        since = statistics.mean(begin[(r, iteration)] for r in ranks)
        for group, end in aligned.items():
            if ranks <= group and since < end <= mean:
                since = end
        role = ops[(cls, op)][0]
        out.append((role, len(ranks), mean - since, max(starts) - mean, iteration))
        if role in ALIGNING_ROLES:
            aligned[ranks] = statistics.median(e for _, e in by_rank.values())
    return out


def fit(all_samples):
    e = {}
    scaled = lambda n, l: l / e.setdefault(n, expected_max_of_normals(n))
    fixed = [scaled(n, l) for _, n, t, l, _ in all_samples if t < FIXED_BELOW_NS]
    a = statistics.mean(fixed)
    long = [(scaled(n, l) - a, t) for _, n, t, l, _ in all_samples if t >= RATE_FROM_NS]
    return a, sum(x for x, _ in long) / sum(t for _, t in long), len(fixed), len(long)


def predict(sample_list, a, b):
    """{role: (instances, measured mean L, predicted mean L, mean T)}."""
    by_role = collections.defaultdict(list)
    for role, n, t, l, _ in sample_list:
        by_role[role].append((l, expected_max_of_normals(n) * (a + b * t), t))
    return {role: (len(v), statistics.mean(x[0] for x in v), statistics.mean(x[1] for x in v),
                   statistics.mean(x[2] for x in v)) for role, v in sorted(by_role.items())}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fit-on", required=True)
    parser.add_argument("--json")
    parser.add_argument("studies", nargs="+", help="NAME=WORK_DIR (the study's work folder, with runs/)")
    args = parser.parse_args()
    studies = {}
    for spec in args.studies:
        name, work = spec.split("=", 1)
        runs = sorted(os.path.join(work, "runs", d) for d in os.listdir(os.path.join(work, "runs")))
        studies[name] = {os.path.basename(r): samples(r) for r in runs
                         if os.path.exists(os.path.join(r, "nccl_kernels.csv.gz"))}
    a, b, n_fixed, n_rate = fit([s for run in studies[args.fit_on].values() for s in run])
    print(f"fit on {args.fit_on}: a = {a / 1e3:.1f} us (mean of {n_fixed} instances with T < 1 ms), "
          f"b = {100 * b:.3f}% (from {n_rate} instances with T >= 10 ms)\n")
    result = {"fit_on": args.fit_on, "fixed_ns": a, "rate": b, "studies": {}}
    for name, runs in studies.items():
        held = "in-sample" if name == args.fit_on else "held out"
        print(f"### {name} ({held})\n")
        print("| run | role | instances | mean T ms | measured L us | predicted L us | per iteration: measured "
              "ms | predicted ms |")
        print("|---|---|---|---|---|---|---|---|")
        errors, totals = [], []
        for run, sample_list in runs.items():
            iterations = len({s[4] for s in sample_list}) or 1
            for role, (count, measured, predicted, t) in predict(sample_list, a, b).items():
                print(f"| {run[:2]} | {role} | {count} | {t / 1e6:.2f} | {measured / 1e3:.0f} | "
                      f"{predicted / 1e3:.0f} | {count * measured / iterations / 1e6:.2f} | "
                      f"{count * predicted / iterations / 1e6:.2f} |")
                errors.append(abs(predicted - measured) * count / iterations)
                totals.append(measured * count / iterations)
                result["studies"].setdefault(name, {}).setdefault(run, {})[role] = {
                    "instances": count, "mean_T_ns": t, "measured_L_ns": measured, "predicted_L_ns": predicted}
        print(f"\n{name}: |predicted - measured| summed over runs and roles = {sum(errors) / 1e6:.2f} ms per "
              f"iteration, {100 * sum(errors) / sum(totals):.0f}% of the measured {sum(totals) / 1e6:.2f} ms\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
