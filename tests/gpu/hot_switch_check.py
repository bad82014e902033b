#!/usr/bin/env python3
"""twin execute on hot-switching plans on one GPU (HotSPa): sequences bucketed by length, each bucket packed into
rows of its longest length and trained under its own micro-batch size and recompute, the gradients of all
phases accumulated into one optimizer step.

1. The shipped scenario (two length buckets, memory tight enough that the longest sequences need recompute):
   `twin simulate` ranks the hot-switching plans beside the static ones (every sequence packed into rows of the
   longest length under one strategy); the winner (hot switching) and the best static-packed plan
   (`--plan-key`) both run.
2. Both plans train the same sequences each step (a sequence's tokens follow from its length and ordinal): their
   loss curves agree within bf16 tolerance, and the loss falls.
3. Each run against its prediction, and the measured gain of hot switching over the static plan against the
   predicted gain.
4. The hot-switching run through `twin report` and `twin calibrate --from-trace` (its phases are rank classes of
   one GPU).

Usage: hot_switch_check.py --twin build/twin --scenario scenarios/llama2-7b-1xH200-hot-switch.json [--out DIR]
Results: $OUT/hot_switch_check.md and $OUT/hot_switch_check.json; exit 1 when a check fails.
"""
import argparse, csv, json, os, sys, time

import execute_check as ec


def simulate_and_run(twin, folder, scenario, plan_key, iters, warmup, lr, log):
    """Simulates `scenario` into `folder` (best.json of `plan_key` when given), runs best.json there; returns
    metrics.json, or None with the failing command logged."""
    os.makedirs(folder, exist_ok=True)
    started = time.time()
    simulate = [twin, "simulate", scenario, "--out", folder, "--quiet", "--top", "0"]
    if plan_key:
        simulate += ["--plan-key", plan_key]
    for command in [simulate, [twin, "execute", "--plan", os.path.join(folder, "best.json"), "--run", folder,
                               "--iters", str(iters), "--warmup", str(warmup), "--lr", str(lr)]]:
        result = ec.run_logged(command, log)
        if result.returncode != 0:
            print(f"  {folder}: FAILED ({' '.join(command[:2])}): {result.stdout.strip().splitlines()[-1:]}")
            return None
    with open(os.path.join(folder, "metrics.json")) as f:
        metrics = json.load(f)
    metrics["wall_s"] = time.time() - started
    return metrics


def best_static_key(ranking_csv):
    with open(ranking_csv) as f:
        for row in csv.DictReader(f):
            if row["strategy"].startswith("static-packed:") and row["feasible"] == "true":
                return row["strategy"], float(row["iteration_time_s"])
    return None, None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--twin", required=True)
    parser.add_argument("--scenario", required=True)
    parser.add_argument("--out", default=os.environ.get("OUT", "out") + "/hot-switch")
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    # 3e-4 (twin execute's default) spiked the loss of these 28 layers at step 3 and again at step 10 on an H200
    # (2026-11-25, 16:02), where bf16 differences between the two packings then grew into different curves.
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--tolerance", type=float, default=0.02,
                        help="largest relative loss difference over the first half of the steps (bf16); the whole "
                             "curve is held to 5 times it (differences grow with the steps)")
    parser.add_argument("--prediction-tolerance", type=float, default=0.15,
                        help="largest relative error of a run's iteration time against its prediction")
    parser.add_argument("--gain-tolerance", type=float, default=0.10,
                        help="largest difference between the measured and the predicted gain (a fraction)")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, "hot_switch_check.log"), "w")
    scenario = os.path.abspath(args.scenario)
    report, failed = {"scenario": args.scenario, "runs": {}}, False

    hot = simulate_and_run(args.twin, os.path.join(args.out, "hot-switch"), scenario, None, args.iters, args.warmup,
                           args.lr, log)
    static_key, _ = best_static_key(os.path.join(args.out, "hot-switch", "ranking.csv"))
    static = simulate_and_run(args.twin, os.path.join(args.out, "static"), scenario, static_key, args.iters,
                              args.warmup, args.lr, log) if static_key else None
    lines = [f"## Hot switching on one GPU: {args.scenario}", "",
             "| run | plan | loss step 1 | loss last | iteration s | MFU | predicted s | error | peak GiB | result |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    runs = {}
    for name, metrics in [("hot-switch", hot), ("static", static)]:
        if metrics is None:
            failed = True
            lines.append(f"| {name} | | | | FAILED | | | | | FAIL |")
            continue
        m, p = metrics["measured"], metrics["predicted"]
        losses = [s["loss"] for s in metrics["steps"]]
        error = m["iteration_s"] / p["iteration_time_s"] - 1
        peak = max(r["peak_memory_GiB"] for r in metrics["ranks"])
        ok = losses[-1] < 0.9 * losses[0] and abs(error) <= args.prediction_tolerance
        failed |= not ok
        runs[name] = {"plan": metrics["plan"], "losses": losses, "measured_s": m["iteration_s"],
                      "predicted_s": p["iteration_time_s"], "error": error, "mfu": m["mfu"], "peak_GiB": peak,
                      "wall_s": metrics["wall_s"], "ok": ok}
        lines.append(f"| {name} | `{metrics['plan']}` | {losses[0]:.4f} | {losses[-1]:.4f} | {m['iteration_s']:.4f} | "
                     f"{100 * m['mfu']:.1f}% | {p['iteration_time_s']:.4f} | {100 * error:+.1f}% | {peak:.1f} | "
                     f"{'pass' if ok else 'FAIL'} |")
        print(lines[-1], flush=True)
    report["runs"] = runs

    if "hot-switch" in runs and "static" in runs:
        hot_run, static_run = runs["hot-switch"], runs["static"]
        first_half, whole = ec.curve_differences(hot_run["losses"], static_run["losses"])
        same_loss = first_half <= args.tolerance and whole <= 5 * args.tolerance
        measured_gain = static_run["measured_s"] / hot_run["measured_s"] - 1
        predicted_gain = static_run["predicted_s"] / hot_run["predicted_s"] - 1
        gain_ok = abs(measured_gain - predicted_gain) <= args.gain_tolerance
        failed |= not (same_loss and gain_ok)
        report["comparison"] = {"max_relative_loss_difference": whole, "first_half": first_half,
                                "measured_gain": measured_gain, "predicted_gain": predicted_gain,
                                "same_loss": same_loss, "gain_ok": gain_ok}
        lines += ["", "Hot switching against the best static-packed plan (the same sequences each step)", "",
                  "| loss difference (first half / all steps) | measured gain | predicted gain | result |",
                  "|---|---|---|---|",
                  f"| {first_half:.2e} / {whole:.2e} | {100 * measured_gain:+.1f}% | {100 * predicted_gain:+.1f}% | "
                  f"{'pass' if same_loss and gain_ok else 'FAIL'} |"]

    folder = os.path.join(args.out, "hot-switch")
    if hot is not None:
        fold = ec.run_logged([args.twin, "calibrate", "--from-trace", folder], log)
        shown = ec.run_logged([args.twin, "report", folder], log)
        changes = os.path.join(folder, "profile.changes.json")
        effect = {}
        if os.path.exists(changes):
            with open(changes) as f:
                effect = json.load(f).get("effect", {})
        ok = fold.returncode == 0 and shown.returncode == 0 and effect.get("ops_folded", 0) > 0
        failed |= not ok
        report["fold"] = {"effect": effect, "ok": ok}
        lines += ["", "`twin calibrate --from-trace` and `twin report` on the hot-switching run", "",
                  "| ops folded | error before | error after | report | result |", "|---|---|---|---|---|",
                  f"| {effect.get('ops_folded')} | {100 * effect.get('error_before', 0):+.1f}% | "
                  f"{100 * effect.get('error_after', 0):+.1f}% | {'written' if shown.returncode == 0 else 'FAILED'} | "
                  f"{'pass' if ok else 'FAIL'} |"]

    ec.write_results(args.out, "hot_switch_check", lines, report)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
