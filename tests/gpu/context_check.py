#!/usr/bin/env python3
"""twin execute on context-parallel plans (the ring: Megatron's cp_comm_type p2p): the small Llama-shaped model
against its own single-GPU loss curve with the sequence split over 2 (and, given four GPUs, 4) CP ranks, under
recompute, cuDNN's deterministic attention backward, TP with SP and data parallelism; then Llama-2-7B widths at a
long sequence, one GPU against CP 2, timed against the prediction, traced, reported and folded into a profile
(`twin calibrate --from-trace`).

Usage: context_check.py --twin build/twin [--out DIR] [--gpus N] [--iters N] [--profile NAME|FILE] [--gpu NAME]
Results: $OUT/context_check.md and $OUT/context_check.json; exit 1 when a check fails (or with fewer than 2 GPUs).
"""
import json, os, sys

import execute_check as ec

# (name, GPUs, strategy fields beyond execute_check's defaults[, twin execute arguments])
CORRECTNESS = [
    ("single", 1, {}),
    ("cp2", 2, {"context_parallel_size": 2}),
    ("cp2-recompute-selective", 2, {"context_parallel_size": 2, "recompute": "selective"}),
    ("cp2-recompute-full", 2, {"context_parallel_size": 2, "recompute": "full"}),
    ("cp2-deterministic-attention", 2, {"context_parallel_size": 2}, ec.DETERMINISTIC_ATTENTION),
    ("cp2-residual-fusion", 2, {"context_parallel_size": 2, **ec.RESIDUAL_FUSION}),
    ("cp2-zero1", 2, {"context_parallel_size": 2, "zero_stage": 1}),
    # The two strands' rings share the ring's stream, in the graph's order (the engine's too).
    ("cp2-double-strand", 2, {"context_parallel_size": 2, "schedule": "double-strand"}),
    ("cp4", 4, {"context_parallel_size": 4}),
    ("cp2-dp2", 4, {"context_parallel_size": 2}),
    ("cp2-tp2-sp", 4, {"context_parallel_size": 2, "tensor_model_parallel_size": 2, "sequence_parallel": True}),
    ("cp2-pp2", 4, {"context_parallel_size": 2, "pipeline_model_parallel_size": 2}),
]
# (name, GPUs, micro-batch, global batch, strategy fields): Llama-2-7B widths, 4 layers, seq 16384.
SPEED = [("7b4l-seq16k-single", 1, 1, 2, {}),
         ("7b4l-seq16k-cp2", 2, 1, 2, {"context_parallel_size": 2})]
SPEED_SEQ = 16384


def main():
    args, log = ec.family_check_arguments(__doc__, "context_check", gpus=2)
    report = {"correctness": {}, "speed": {}}
    failed = args.gpus < 2
    lines = ["## Context parallelism (ring): loss against the single-GPU run (small Llama-shaped model: 4 layers, "
             "hidden 1024, GQA 16/4, vocab 8192, seq 1024, global batch 8, micro-batch 2)", "",
             "| case | GPUs | loss step 1 | loss last | max relative difference (first half / all steps) | result |",
             "|---|---|---|---|---|---|"]
    baseline = None
    for name, gpus, fields, *rest in CORRECTNESS:
        if gpus > args.gpus:
            continue
        doc = ec.scenario(name, ec.SMALL, gpus, 1024, 8, 2, fields)
        metrics = ec.run_case(args.twin, args.out, name, doc, args.iters, 2, log, rest[0] if rest else ())
        if metrics is None:
            failed = True
            lines.append(f"| {name} | {gpus} | | | | FAILED to run |")
            continue
        losses = [s["loss"] for s in metrics["steps"]]
        baseline = baseline or losses
        row, numbers, ok = ec.curve_row(name, [str(gpus)], losses, baseline, args.tolerance)
        failed |= not ok
        report["correctness"][name] = dict(numbers, gpus=gpus)
        lines.append(row)
        print(row, flush=True)

    lines += ["", f"## Llama-2-7B widths, 4 layers, seq {SPEED_SEQ}: one GPU and CP 2, measured against predicted; the CP "
              "run traced, reported and folded (`twin calibrate --from-trace`)", "", *ec.SPEED_TABLE]
    for name, gpus, mbs, batch, fields in SPEED:
        if gpus > args.gpus:
            continue
        doc = ec.scenario(name, ec.LLAMA7B_4L, gpus, SPEED_SEQ, batch, mbs, fields)
        traced = gpus > 1  # every run is traced (CUPTI); the CP run's trace is folded
        metrics = ec.run_case(args.twin, args.out, name, doc, args.iters, 3, log)
        if metrics is None:
            failed = True
            lines.append(f"| {name} | {gpus} | FAILED | | | | | | | |")
            continue
        ok, fold = True, ""
        if traced:
            folded, reported, effect = ec.fold_and_report(args.twin, os.path.join(args.out, name), log)
            ok = folded and reported
            fold = ec.fold_text(folded, effect)
            report["speed"][name] = {"metrics": metrics, "fold_effect": effect, "ok": ok}
        else:
            report["speed"][name] = {"metrics": metrics, "ok": ok}
        failed |= not ok
        lines.append(ec.speed_row(name, gpus, metrics, fold, ok))
        print(lines[-1], flush=True)

    ec.write_results(args.out, "context_check", lines, report)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
