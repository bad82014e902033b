#!/usr/bin/env python3
"""twin execute on double-strand plans on one GPU (DHeLlam's co-execution): the forward strand of one micro-batch
on one CUDA stream beside the backward strand of another on a second, the paired segments and events the graph has.

1. The small dense model (and the small MoE model, whose routers then run on both streams under full recompute)
   under double strand against its own 1F1B loss curve.
2. Llama-2-7B widths (4 layers, seq 4096) under 1F1B and double strand, each against its prediction, and the
   measured cost of co-running two strands on one GPU (double strand over 1F1B) against the simulator's.
3. The double-strand run through `twin report` and `twin calibrate --from-trace`: the compute ops that shared the GPU
   with the other strand are left out of the fold (ops_shared_gpu), the rest fold as usual.
4. With --gpus 2 or more: double strand under TP 2 with sequence parallelism (DHeLlam's case: one strand's TP
   collectives beside the other's compute) against 1F1B under the same TP, and over two pipeline stages (the folded
   pipeline) against 1F1B over two stages: the loss on the small model and, at Llama-2-7B widths, each iteration
   and the ratio of the two, measured and predicted; and over two data-parallel GPUs under ZeRO-2 (each strand's
   gradient windows on its own stream) against 1F1B under the same ZeRO (--zero-only: this alone).

Usage: strands_check.py --twin build/twin [--out DIR] [--iters N] [--profile NAME|FILE] [--gpu NAME] [--gpus N]
                        [--two-gpu-only | --zero-only]
Results: $OUT/strands_check.md and $OUT/strands_check.json; exit 1 when a check fails.
"""
import argparse, json, os, sys

import execute_check as ec
import moe_check

STRANDS = {"schedule": "double-strand"}
# (name, model, strategy fields): each family's first case is the 1F1B baseline the others are held to.
CORRECTNESS = [
    ("dense", ec.SMALL, [
        ("1f1b", {}),
        ("double-strand", STRANDS),
        ("double-strand-recompute-selective", {**STRANDS, "recompute": "selective"}),
        ("double-strand-recompute-full", {**STRANDS, "recompute": "full"}),
        ("double-strand-residual-fusion", {**STRANDS, **ec.RESIDUAL_FUSION}),
    ]),
    ("moe", moe_check.MOE_SMALL, [
        ("moe-1f1b", {}),
        ("moe-double-strand-recompute-full", {**STRANDS, "recompute": "full"}),
    ]),
]
TP2 = {"tensor_model_parallel_size": 2, "sequence_parallel": True}
# Under TP 2 (two GPUs): the small model's 1F1B baseline and double strand.
CORRECTNESS_TP = [
    ("tp2-sp-1f1b", TP2),
    ("tp2-sp-double-strand", {**TP2, **STRANDS}),
    ("tp2-sp-double-strand-recompute-full", {**TP2, **STRANDS, "recompute": "full"}),
]
# Data parallel over two GPUs with ZeRO-2 (two GPUs): each strand's gradient windows on its own compute stream, each
# micro-batch's reduce-scatter into the shard (executor/weight_residency.hpp), against 1F1B under the same ZeRO.
DP2_ZERO2 = {"zero_stage": 2, "micro_batch_size": 1}
CORRECTNESS_DP = [
    ("dp2-zero2-1f1b", DP2_ZERO2),
    ("dp2-zero2-double-strand", {**DP2_ZERO2, **STRANDS}),
]
PP2 = {"pipeline_model_parallel_size": 2}
# Over two stages (DHeLlam's folded W-shaped pipeline: each stage holds a layer chunk and its mirror, each pass's
# transfer carries one strand's activation and the other's gradient): the small model's 1F1B baseline and double
# strand.
CORRECTNESS_PP = [
    ("pp2-1f1b", PP2),
    ("pp2-double-strand", {**PP2, **STRANDS}),
]
SPEED_PP = [
    ("7b4l-pp2-1f1b", 1, 8, PP2),
    ("7b4l-pp2-double-strand", 1, 8, {**PP2, **STRANDS}),
]
# (name, micro-batch, global batch, strategy fields) at Llama-2-7B widths under TP 2.
SPEED_TP = [
    ("7b4l-tp2-sp-1f1b", 1, 4, TP2),
    ("7b4l-tp2-sp-double-strand", 1, 4, {**TP2, **STRANDS}),
]
# (name, micro-batch, global batch, strategy fields): the 1F1B and double-strand pair of each size.
SPEED = [
    ("7b4l-1f1b", 1, 4, {}),
    ("7b4l-double-strand", 1, 4, STRANDS),
    ("7b4l-mbs2-1f1b", 2, 8, {}),
    ("7b4l-mbs2-double-strand", 2, 8, STRANDS),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--twin", required=True)
    parser.add_argument("--out", default=os.environ.get("OUT", "out") + "/strands")
    parser.add_argument("--iters", type=int, default=12)
    parser.add_argument("--tolerance", type=float, default=0.02)
    parser.add_argument("--profile", default="h200-x1")
    parser.add_argument("--gpu", default=ec.GPU)
    parser.add_argument("--gpus", type=int, default=1,
                        help="GPUs on this machine: 2 or more adds the TP 2 and two-stage checks")
    parser.add_argument("--two-gpu-only", action="store_true", help="only the checks on two GPUs (part 4)")
    parser.add_argument("--zero-only", action="store_true", help="only part 4's data-parallel ZeRO-2 loss check")
    args = parser.parse_args()
    ec.GPU = args.gpu
    ec.PROFILE = os.path.abspath(args.profile) if os.path.exists(args.profile) else args.profile
    os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, "strands_check.log"), "w")
    report = {"correctness": {}, "speed": {}, "fold": {}}
    failed = False

    if args.zero_only:
        lines = []
        failed = zero_cases(args, log, lines, report)
        ec.write_results(args.out, "strands_check", lines, report)
        return 1 if failed else 0
    if args.two_gpu_only:
        lines = []
        failed = check_on_two_gpus(args, log, lines, report)
        ec.write_results(args.out, "strands_check", lines, report)
        return 1 if failed else 0

    lines = ["## Double strand on one GPU: loss against 1F1B (seq 1024, global batch 8, micro-batch 2: 4 micro-batches)"]
    for family, model, cases in CORRECTNESS:
        # MoE: routing is discrete, so (as moe_check.py) the whole curve is held to 5x the tolerance.
        failed |= loss_cases(args, log, lines, report, model, 1, cases, 5 if family == "moe" else 1)

    lines += ["", "## Llama-2-7B widths, 4 layers, seq 4096, one GPU: 1F1B and double strand, measured against "
              f"predicted ({args.profile})"]
    failed |= speed_cases(args, log, lines, report, 1, SPEED)
    lines += ["", "Co-running two strands on one GPU: double strand's iteration over 1F1B's, measured and predicted"]
    ratio_lines(lines, report, [("7b4l-1f1b", "7b4l-double-strand"), ("7b4l-mbs2-1f1b", "7b4l-mbs2-double-strand")])

    # The double-strand run through report and recalibration: the profile written beside the run (named profile).
    failed |= fold_lines(args, log, lines, report, "7b4l-double-strand", "the double-strand run (micro-batch 1)")

    if args.gpus >= 2:
        failed |= check_on_two_gpus(args, log, lines, report)
    ec.write_results(args.out, "strands_check", lines, report)
    return 1 if failed else 0


def zero_cases(args, log, lines, report):
    """Double strand over two data-parallel GPUs under ZeRO-2 against 1F1B under the same ZeRO (four micro-batches).
    Returns whether a check failed."""
    lines += ["", "## Double strand, DP 2 with ZeRO-2 (two GPUs): loss against 1F1B under the same ZeRO"]
    return loss_cases(args, log, lines, report, ec.SMALL, 2, CORRECTNESS_DP, 1)


def check_on_two_gpus(args, log, lines, report):
    """Double strand under TP 2 with SP against 1F1B under the same TP, over two pipeline stages against 1F1B
    over two stages, and over two data-parallel GPUs under ZeRO-2, on two GPUs. Returns whether a check failed."""
    failed = zero_cases(args, log, lines, report)
    lines += ["", "## Double strand under TP 2 with sequence parallelism (two GPUs): loss against 1F1B under TP 2"]
    failed |= loss_cases(args, log, lines, report, ec.SMALL, 2, CORRECTNESS_TP, 1)
    lines += ["", f"## Llama-2-7B widths, 4 layers, seq 4096, TP 2 with SP on two GPUs ({args.profile})"]
    failed |= speed_cases(args, log, lines, report, 2, SPEED_TP)
    ratio_lines(lines, report, [(SPEED_TP[0][0], SPEED_TP[1][0])])
    lines += ["", "## Double strand over two pipeline stages (the folded pipeline, two GPUs): loss against 1F1B over "
              "two stages"]
    failed |= loss_cases(args, log, lines, report, ec.SMALL, 2, CORRECTNESS_PP, 1)
    lines += ["", f"## Llama-2-7B widths, 4 layers, seq 4096, two pipeline stages, 8 micro-batches ({args.profile})"]
    failed |= speed_cases(args, log, lines, report, 2, SPEED_PP)
    ratio_lines(lines, report, [(SPEED_PP[0][0], SPEED_PP[1][0])])
    failed |= fold_lines(args, log, lines, report, SPEED_PP[1][0], "the double-strand run over two stages")
    return failed


def fold_lines(args, log, lines, report, case, title):
    """`twin calibrate --from-trace` and `twin report` on a double-strand case's run folder: the compute ops that
    shared the GPU with the other strand are left out of the fold, the rest fold. Appends a table; returns whether
    the check failed (a case that did not run is reported by its own table)."""
    folder = os.path.join(args.out, case)
    if not os.path.isdir(folder):
        return False
    folded, shown, effect = ec.fold_and_report(args.twin, folder, log, ec.PROFILE)
    ok = folded and shown and effect.get("ops_shared_gpu", 0) > 0 and effect.get("ops_folded", 0) > 0
    report["fold"][case] = {"effect": effect, "ok": ok}
    lines += ["", f"`twin calibrate --from-trace` on {title}", "",
              "| ops folded | ops left out: shared the GPU | error before | error after | report | result |",
              "|---|---|---|---|---|---|",
              f"| {effect.get('ops_folded')} | {effect.get('ops_shared_gpu')} | "
              f"{100 * effect.get('error_before', 0):+.1f}% | {100 * effect.get('error_after', 0):+.1f}% | "
              f"{'written' if shown else 'FAILED'} | {'pass' if ok else 'FAIL'} |"]
    return not ok


def loss_cases(args, log, lines, report, model, gpus, cases, whole_factor):
    """The small model's loss curve of each case (seq 1024, global batch 8, micro-batch 2) against the first case's:
    the first half of the steps within the tolerance, the whole curve within whole_factor times it, and the loss
    going down. Appends a table to lines; returns whether a case failed."""
    lines += ["", "| case | loss step 1 | loss last | max relative difference (first half / all steps) | result |",
              "|---|---|---|---|---|"]
    failed, baseline = False, None
    for name, fields in cases:
        metrics = ec.run_case(args.twin, args.out, name, ec.scenario(name, model, gpus, 1024, 8, 2, fields),
                              args.iters, 2, log)
        if metrics is None:
            failed = True
            lines.append(f"| {name} | | | | FAILED to run |")
            continue
        losses = [s["loss"] for s in metrics["steps"]]
        baseline = baseline or losses
        first_half, whole = ec.curve_differences(losses, baseline)
        ok = first_half <= args.tolerance and losses[-1] < 0.8 * losses[0] and whole <= whole_factor * args.tolerance
        failed |= not ok
        report["correctness"][name] = {"gpus": gpus, "losses": losses, "max_relative_difference": whole,
                                       "max_relative_difference_first_half": first_half, "ok": ok}
        lines.append(f"| {name} | {losses[0]:.4f} | {losses[-1]:.4f} | {first_half:.2e} / {whole:.2e} | "
                     f"{'pass' if ok else 'FAIL'} |")
        print(lines[-1], flush=True)
    return failed


def speed_cases(args, log, lines, report, gpus, cases):
    """Each case at Llama-2-7B widths (4 layers, seq 4096) on `gpus` GPUs, measured against predicted. Appends a
    table to lines and the metrics to report["speed"]; returns whether a case failed to run."""
    lines += ["", "| case | micro-batch | global batch | iteration s | MFU | predicted s | error | peak GiB | "
              "predicted GiB |", "|---|---|---|---|---|---|---|---|---|"]
    failed = False
    for name, mbs, batch, fields in cases:
        metrics = ec.run_case(args.twin, args.out, name,
                              ec.scenario(name, ec.LLAMA7B_4L, gpus, 4096, batch, mbs, fields), args.iters, 3, log)
        if metrics is None:
            failed = True
            lines.append(f"| {name} | {mbs} | {batch} | FAILED | | | | | |")
            continue
        m, p = metrics["measured"], metrics["predicted"]
        peak = max(r["peak_memory_GiB"] for r in metrics["ranks"])
        predicted_peak = max(r["predicted_peak_memory_GiB"] for r in metrics["ranks"])
        report["speed"][name] = metrics
        lines.append(f"| {name} | {mbs} | {batch} | {m['iteration_s']:.4f} | {100 * m['mfu']:.1f}% | "
                     f"{p['iteration_time_s']:.4f} | {100 * (m['iteration_s'] / p['iteration_time_s'] - 1):+.1f}% | "
                     f"{peak:.1f} | {predicted_peak:.1f} |")
        print(lines[-1], flush=True)
    return failed


def ratio_lines(lines, report, pairs):
    """Double strand's iteration over 1F1B's, measured and predicted, for each (1F1B case, double-strand case) that
    ran."""
    lines += ["", "| pair | measured | predicted |", "|---|---|---|"]
    for one, two in pairs:
        if one in report["speed"] and two in report["speed"]:
            a, b = report["speed"][one], report["speed"][two]
            ratio_measured = b["measured"]["iteration_s"] / a["measured"]["iteration_s"]
            ratio_predicted = b["predicted"]["iteration_time_s"] / a["predicted"]["iteration_time_s"]
            report["speed"][f"{two}/{one}"] = {"measured": ratio_measured, "predicted": ratio_predicted}
            lines.append(f"| {two} / {one} | {ratio_measured:.4f} | {ratio_predicted:.4f} |")


if __name__ == "__main__":
    sys.exit(main())
