#!/usr/bin/env python3
"""ZeRO's memory as twin execute keeps it against the memory model (issue 37 item 4, issue 42 item 4): the same plan
of a scenario at ZeRO 1, 2 and 3 simulated (`twin simulate --plan-key`) and run (`twin execute --best`), each rank's
measured peak beside its predicted peak, the step beside its prediction, the loss going down.

ZeRO-2 keeps only its gradient shard between micro-batches and ZeRO-3 also its weight shard between gathers
(executor/weight_residency.hpp), so their peaks must fall below ZeRO-1's and stay within TOLERANCE of the model's.
Their losses must follow the first stage's over its first FOLLOW steps within LOSS_TOLERANCE (the same model and data;
only the order of the sums differs): the plain recipe's loss spikes at these widths (docs/EXECUTOR.md), after which
bf16 rounding lets the curves part, so the first steps are the comparison (tests/gpu/execute_check.py holds whole
curves of a small model to one GPU's).
Usage: zero_memory_check.py --twin BIN --out DIR SCENARIO:KEY_WITHOUT_ZERO ... [--iters N] [--tolerance 0.03]
KEY_WITHOUT_ZERO is a plan key with `z{}` where the stage goes, e.g. tp1.pp1.cp1.ep1.dp2.vpp1.nosp.mbs1.z{}.rc-none.1f1b
Exits 1 when a run fails, a peak is off by more than the tolerance, or a stage does not save over the one below.
"""
import argparse, json, os, sys

import execute_check as ec


def run(command, log):
    """The command's exit status, its output appended to the file `log` (execute_check's run_logged)."""
    with open(log, "a") as out:
        return ec.run_logged(command, out).returncode


def one_plan(args, scenario, key, folder):
    """Simulates and runs one plan; its metrics, or None where a step failed."""
    os.makedirs(folder, exist_ok=True)
    log = os.path.join(folder, "run.log")
    if run([args.twin, "simulate", scenario, "--out", folder, "--quiet", "--top", "0", "--plan-key", key], log):
        return None
    if run([args.twin, "execute", "--best", "--run", folder, "--iters", str(args.iters), "--warmup", "2"], log):
        return None
    with open(os.path.join(folder, "metrics.json")) as f:
        return json.load(f)


def losses(metrics):
    return [step["loss"] for step in metrics["steps"]]


def row(name, stage, metrics, first, args):
    """One table row and whether it passes: the worst rank's peak against its prediction, the loss against the first
    stage's run (`first`, None for the first stage itself) over the first FOLLOW steps."""
    ranks = metrics["ranks"]
    worst = max(ranks, key=lambda r: abs(r["peak_memory_GiB"] / r["predicted_peak_memory_GiB"] - 1))
    off = worst["peak_memory_GiB"] / worst["predicted_peak_memory_GiB"] - 1
    step, predicted = metrics["measured"]["iteration_s"], metrics["predicted"]["iteration_time_s"]
    follows = 0.0
    if first is not None:
        pairs = list(zip(losses(metrics), losses(first)))[:args.follow]
        follows = max(abs(a / b - 1) for a, b in pairs)
    ok = abs(off) <= args.tolerance and follows <= args.loss_tolerance
    peak = max(r["peak_memory_GiB"] for r in ranks)
    curve = " ".join(f"{x:.2f}" for x in losses(metrics))
    text = (f"| {name} | {stage} | {peak:.2f} | {max(r['predicted_peak_memory_GiB'] for r in ranks):.2f} | {off:+.2%} | "
            f"{step:.4f} | {predicted:.4f} | {step / predicted - 1:+.2%} | {follows:.1e} | {curve} | "
            f"{'ok' if ok else 'FAIL'} |")
    return text, ok, peak


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--twin", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--iters", type=int, default=8)
    parser.add_argument("--tolerance", type=float, default=0.03)
    parser.add_argument("--stages", default="1,2,3")
    parser.add_argument("--follow", type=int, default=4, help="steps whose loss must follow the first stage's")
    parser.add_argument("--loss-tolerance", type=float, default=0.02)
    parser.add_argument("plans", nargs="+", help="SCENARIO:KEY with z{} for the ZeRO stage")
    args = parser.parse_args()
    lines = ["| scenario | ZeRO | peak GiB | predicted GiB | worst rank off | step s | predicted s | step off | "
             "loss off the first stage's | losses | |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    failed = False
    for plan in args.plans:
        scenario, key = plan.rsplit(":", 1)
        name = os.path.splitext(os.path.basename(scenario))[0]
        peaks, first = [], None
        for stage in [int(s) for s in args.stages.split(",")]:
            metrics = one_plan(args, scenario, key.format(stage), os.path.join(args.out, f"{name}-z{stage}"))
            if metrics is None:
                lines.append(f"| {name} | {stage} | run failed (see its run.log) | | | | | | | | FAIL |")
                failed = True
                continue
            text, ok, peak = row(name, stage, metrics, first, args)
            first = first or metrics
            lines.append(text)
            failed |= not ok
            peaks.append((stage, peak))
        for (low, low_peak), (high, high_peak) in zip(peaks, peaks[1:]):
            if high_peak >= low_peak:
                lines.append(f"| {name} | {high} | peak {high_peak:.2f} GiB not below ZeRO-{low}'s {low_peak:.2f} | "
                             "| | | | | | | FAIL |")
                failed = True
    report = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "zero_memory.md"), "w") as f:
        f.write(report)
    print(report)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
