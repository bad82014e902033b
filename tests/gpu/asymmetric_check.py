#!/usr/bin/env python3
"""twin execute on asymmetric plans (HexiScale): pipelines of their own batch share whose stages have their own
GPUs, TP size and layers, the pipelines' gradients summed piece by piece (executor/pipeline_reduction.hpp).

1. A small Llama-shaped model, 8 sequences per step, on 4 GPUs: each plan pinned (strategy.pipelines), simulated
   and run; every plan trains on the same sequences, so its loss curve must follow the one-GPU run's within bf16
   tolerance (a gradient lost, counted twice or scaled wrongly parts them at once). The plans cover a TP-2 stage
   beside a pipeline of two TP-1 stages (with and without sequence parallelism), a boundary between stages of
   different TP sizes, uneven layer splits and batch shares, ZeRO-1 over the pipelines, and a vocabulary the
   pipelines' TP sizes pad differently.
2. Llama-2-7B widths (4 layers), 16 sequences of 4,096 tokens: two asymmetric plans measured against their
   predictions, reported and folded (`twin calibrate --from-trace`).

Usage: asymmetric_check.py --twin build/twin [--out DIR] [--gpus N] [--iters N] [--profile NAME|FILE] [--gpu NAME]
Results: $OUT/asymmetric_check.md and .json; exit 1 when a check fails (or with fewer than 4 GPUs).
"""
import copy, sys

import execute_check as ec

SEQ, BATCH = 1024, 8


def stage(devices, tp, layers):
    return {"devices": devices, "tensor_model_parallel_size": tp, "num_layers": layers}


def pipeline(micro_batches, *stages, micro_batch=1):
    return {"micro_batch_size": micro_batch, "num_micro_batches": micro_batches, "stages": list(stages)}


# (name, sequence_parallel, pipelines): every plan over GPUs 0-3 of a 4-layer model, 8 sequences per step.
CORRECTNESS = [
    ("tp2 | pp2", True, [pipeline(4, stage([0, 1], 2, 4)), pipeline(4, stage([2], 1, 2), stage([3], 1, 2))]),
    ("tp2 | pp2 nosp", False, [pipeline(4, stage([0, 1], 2, 4)), pipeline(4, stage([2], 1, 2), stage([3], 1, 2))]),
    ("tp2>tp1 | tp1", True, [pipeline(5, stage([0, 1], 2, 3), stage([2], 1, 1)), pipeline(3, stage([3], 1, 4))]),
    ("tp1>tp2 | tp1 nosp", False, [pipeline(6, stage([0], 1, 1), stage([1, 2], 2, 3)), pipeline(2, stage([3], 1, 4))]),
    # ZeRO-1 over the pipelines: each GPU steps its part of every reduction and gathers the others'
    ("tp2>tp1 | tp1 zero1", True, [pipeline(5, stage([0, 1], 2, 3), stage([2], 1, 1)), pipeline(3, stage([3], 1, 4))], 1),
]

# A vocabulary of 8,000 pads to 8,064 at TP 1 and to 8,192 at TP 2: the padding rows only pipeline 0 holds are
# reduced over it alone (executor/pipeline_reduction.hpp); checked against the one-GPU run of the same vocabulary.
PADDED = ("tp2 | pp2 vocab 8000", True,
          [pipeline(4, stage([0, 1], 2, 4)), pipeline(4, stage([2], 1, 2), stage([3], 1, 2))])
PADDED_MODEL = dict(ec.SMALL, vocab_size=8000)

# Llama-2-7B widths, 4 layers, 16 sequences of 4,096 tokens.
SPEED = [
    ("7b4l tp2 | pp2", [pipeline(8, stage([0, 1], 2, 4)), pipeline(8, stage([2], 1, 2), stage([3], 1, 2))], 0),
    ("7b4l tp2>tp1 | tp1", [pipeline(10, stage([0, 1], 2, 3), stage([2], 1, 1)), pipeline(6, stage([3], 1, 4))], 0),
    ("7b4l tp2>tp1 | tp1 zero1", [pipeline(10, stage([0, 1], 2, 3), stage([2], 1, 1)), pipeline(6, stage([3], 1, 4))],
     1),
]


def pinned(doc, sequence_parallel, pipelines, zero_stage=0):
    doc = copy.deepcopy(doc)
    doc.pop("search", None)
    doc["strategy"] = {"sequence_parallel": sequence_parallel, "recompute": "none", "schedule": "1f1b",
                       "zero_stage": zero_stage, "pipelines": pipelines}
    return doc


def folder_name(name):
    return name.replace(" | ", "-or-").replace(">", "-to-").replace(" ", "-")


def main():
    args, log = ec.family_check_arguments(__doc__, "asymmetric_check", gpus=4)
    report = {"gpus": args.gpus, "correctness": {}, "speed": {}}
    if args.gpus < 4:
        print(f"asymmetric plans need 4 GPUs here; this machine has {args.gpus}")
        return 1
    failed = False
    lines = [f"## Asymmetric plans on 4 GPUs: loss against one GPU (small Llama-shaped model, {BATCH} sequences of "
             f"{SEQ} tokens per step)", "",
             "| plan | key | loss step 1 | loss last | max relative difference (first half / all steps) | result |",
             "|---|---|---|---|---|---|"]
    one_gpu = ec.scenario("one-gpu", ec.SMALL, 1, SEQ, BATCH, 1, {})
    baseline = ec.run_case(args.twin, args.out, "one-gpu", one_gpu, args.iters, 2, log)
    if baseline is None:
        lines.append("| one GPU | | | | | FAILED to run |")
        ec.write_results(args.out, "asymmetric_check", lines, report)
        return 1
    reference = [s["loss"] for s in baseline["steps"]]
    padded_baseline = ec.run_case(args.twin, args.out, "one-gpu-vocab-8000",
                                  ec.scenario("one-gpu", PADDED_MODEL, 1, SEQ, BATCH, 1, {}), args.iters, 2, log)
    doc = ec.scenario("asymmetric", ec.SMALL, 4, SEQ, BATCH, 1, {})
    padded_doc = ec.scenario("asymmetric", PADDED_MODEL, 4, SEQ, BATCH, 1, {})
    cases = [(case[0], case[1], case[2], case[3] if len(case) > 3 else 0, doc, reference) for case in CORRECTNESS]
    if padded_baseline is not None:
        cases.append((*PADDED, 0, padded_doc, [s["loss"] for s in padded_baseline["steps"]]))
    else:
        failed = True
    for name, sequence_parallel, pipelines, zero_stage, base_doc, reference in cases:
        metrics = ec.run_case(args.twin, args.out, folder_name(name),
                              pinned(base_doc, sequence_parallel, pipelines, zero_stage), args.iters, 2, log)
        if metrics is None:
            failed = True
            lines.append(f"| {name} | | | | | FAILED to run |")
            print(lines[-1], flush=True)
            continue
        row, numbers, ok = ec.curve_row(name, [f"`{metrics['plan']}`"], [s["loss"] for s in metrics["steps"]],
                                        reference, args.tolerance)
        failed |= not ok
        report["correctness"][name] = dict(numbers, plan=metrics["plan"], one_gpu=reference)
        lines.append(row)
        print(row, flush=True)

    lines += ["", "## Llama-2-7B widths, 4 layers, 16 sequences of 4,096 tokens per step on 4 GPUs: measured against "
              "predicted (the pinned plan simulated), traced, reported and folded", "", *ec.SPEED_TABLE]
    doc = ec.scenario("asymmetric-7b4l", ec.LLAMA7B_4L, 4, 4096, 16, 1, {})
    for name, pipelines, zero_stage in SPEED:
        row, numbers, ok = ec.speed_case(args.twin, args.out, folder_name(name), 4,
                                         pinned(doc, True, pipelines, zero_stage), 8, 3, log)
        failed |= not ok
        if numbers:
            report["speed"][name] = numbers
        lines.append(row)
        print(lines[-1], flush=True)
    ec.write_results(args.out, "asymmetric_check", lines, report)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
