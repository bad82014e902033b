#!/usr/bin/env python3
"""twin execute on per-layer plans (Galvatron) over several GPUs: each layer in its own layout (a Megatron TP group
with SP, data parallel over the rest of the stage; or a Ulysses group, weights whole and data parallel over the
stage), ZeRO stage and recompute, stages split unevenly, pinned by the scenario (strategy.per_layer). The small
Llama-shaped model against its single-GPU loss curve; then Llama-2-7B widths (4 layers) under mixed plans on 2 GPUs,
timed against the prediction, traced, reported and folded (`twin calibrate --from-trace`).

Usage: per_layer_layouts_check.py --twin build/twin [--out DIR] [--gpus N] [--iters N] [--profile NAME|FILE]
       [--gpu NAME]
Results: $OUT/per_layer_layouts_check.md and $OUT/per_layer_layouts_check.json; exit 1 when a check fails (or
with fewer than 2 GPUs).
"""
import sys

import execute_check as ec


def layer(group, zero=0, recompute="none", layout="tensor"):
    return {"layout": layout, "group_size": group, "zero_stage": zero, "recompute": recompute}


def ulysses(group, zero=0, recompute="none"):
    return layer(group, zero, recompute, "ulysses")


def plan(stages, stage_micro_batch, micro_batches, split, layers):
    return {"pipeline_model_parallel_size": stages, "stage_micro_batch_size": stage_micro_batch,
            "num_micro_batches": micro_batches, "schedule": "1f1b", "stage_num_layers": split, "layers": layers}


# (name, GPUs, per-layer plan or None for the uniform single-GPU baseline, tied embeddings[, hidden dropout]). Global
# batch 8, seq 1024. With hidden dropout each element's mask is keyed by its place in the batch (executor/dropout_key.hpp),
# so a per-layer plan draws the masks of the one-GPU run and is held to that run's curve. (Ulysses layers with dropout
# failed on two H200s on 2026-11-30 03:44 UTC: the rows were read off each layer's own layout, which counted a Ulysses
# shard's first row twice beside a TP layer and put a data-parallel layer's samples at the embedding block's start;
# read off the embedding's layout since, executor/gpu/dense_block_dropout.cpp, all three pass: 05:01 UTC.)
CORRECTNESS = [
    ("single", 1, None, False),
    ("tp2-tp1-mixed", 2, plan(1, 4, 2, [4], [layer(2), layer(1, 1, "selective"), layer(2, 0, "full"), layer(1)]),
     False),
    ("pp2-uneven", 4, plan(2, 2, 4, [1, 3], [layer(2), layer(1, 1, "full"), layer(2), layer(1, 0, "selective")]),
     False),
    ("tp4-tp2-tp1-zero", 4, plan(1, 4, 2, [4], [layer(4), layer(2, 1), layer(1, 2, "selective"), layer(2, 3, "full")]),
     False),
    ("ulysses2-mixed", 2, plan(1, 4, 2, [4], [ulysses(2), layer(1, 1), ulysses(2, 3, "full"), layer(2)]), False),
    # One sample per stage micro-batch: the embedding and output layer beside Ulysses 2 hold half a sample per GPU.
    ("ulysses2-half-sample-edges", 2, plan(1, 1, 8, [4], [ulysses(2), layer(2), ulysses(2, 1), ulysses(2)]), False),
    ("ulysses4-tp4-mixed", 4, plan(1, 4, 2, [4], [ulysses(4, 1), layer(4), ulysses(2, 0, "selective"),
                                                 layer(1, 2)]), False),
    ("single-tied", 1, None, True),
    ("pp2-tied", 4, plan(2, 2, 4, [2, 2], [layer(2), layer(1, 1), layer(1), layer(2, 0, "full")]), True),
    ("pp2-ulysses-tied", 4, plan(2, 2, 4, [1, 3], [ulysses(2), layer(1), ulysses(2, 1, "full"), ulysses(2)]), True),
    ("single-dropout", 1, None, False, 0.1),
    ("tp2-tp1-mixed-dropout", 2, plan(1, 4, 2, [4], [layer(2), layer(1, 1, "selective"), layer(2, 0, "full"), layer(1)]),
     False, 0.1),
    ("ulysses2-mixed-dropout", 2, plan(1, 4, 2, [4], [ulysses(2), layer(1, 1), ulysses(2, 3, "full"), layer(2)]),
     False, 0.1),
    ("ulysses2-half-sample-edges-dropout", 2, plan(1, 1, 8, [4], [ulysses(2), layer(2), ulysses(2, 1), ulysses(2)]),
     False, 0.1),
]
# Llama-2-7B widths, 4 layers, seq 4096, global batch 4 on 2 GPUs: the first and last layers TP 2, the middle two
# data parallel under ZeRO-1 with full recompute; then Ulysses 2 around TP 2.
SPEED_SEQ, SPEED_BATCH = 4096, 4
SPEED = [("7b4l-per-layer-2gpu", 2, plan(1, 4, 1, [4], [layer(2), layer(1, 1, "full"), layer(1, 1, "full"), layer(2)])),
         ("7b4l-ulysses-2gpu", 2, plan(1, 4, 1, [4], [ulysses(2), layer(2), layer(2), ulysses(2, 1)]))]


def pinned(doc, per_layer):
    doc["strategy"] = {"per_layer": per_layer}
    return doc


def main():
    args, log = ec.family_check_arguments(__doc__, "per_layer_layouts_check", gpus=2)
    report = {"correctness": {}, "speed": {}}
    failed = args.gpus < 2
    lines = ["## Per-layer plans: loss against the single-GPU run (small Llama-shaped model: 4 layers, hidden 1024, "
             "GQA 16/4, vocab 8192, seq 1024, global batch 8)", "",
             "| case | GPUs | layers | loss step 1 | loss last | max relative difference (first half / all steps) | result |",
             "|---|---|---|---|---|---|---|"]
    baselines = {}
    for name, gpus, per_layer, tied, *rest in CORRECTNESS:
        if gpus > args.gpus or not ec.selected(args, name):
            continue
        dropout = rest[0] if rest else 0.0
        model = dict(ec.SMALL, untie_embeddings_and_output_weights=not tied, hidden_dropout=dropout)
        doc = ec.scenario(name, model, gpus, 1024, 8, 2, {})
        if per_layer:
            pinned(doc, per_layer)
        metrics = ec.run_case(args.twin, args.out, name, doc, args.iters, 2, log)
        shown = " ".join(f"{'usp' if l['layout'] == 'ulysses' else 'tp'}{l['group_size']}.z{l['zero_stage']}."
                         f"{l['recompute']}" for l in per_layer["layers"]) if per_layer else "uniform"
        if metrics is None:
            failed = True
            lines.append(f"| {name} | {gpus} | {shown} | | | | FAILED to run |")
            continue
        losses = [s["loss"] for s in metrics["steps"]]
        baselines.setdefault((tied, dropout), losses)
        row, numbers, ok = ec.curve_row(name, [str(gpus), shown], losses, baselines[(tied, dropout)], args.tolerance)
        failed |= not ok
        report["correctness"][name] = dict(numbers, gpus=gpus, layers=shown)
        lines.append(row)
        print(row, flush=True)

    lines += ["", f"## Llama-2-7B widths, 4 layers, seq {SPEED_SEQ}, global batch {SPEED_BATCH}: per-layer plans measured "
              "against predicted, traced, reported and folded (`twin calibrate --from-trace`)", "", *ec.SPEED_TABLE]
    for name, gpus, per_layer in SPEED:
        if gpus > args.gpus or not ec.selected(args, name):
            continue
        doc = pinned(ec.scenario(name, ec.LLAMA7B_4L, gpus, SPEED_SEQ, SPEED_BATCH, 1, {}), per_layer)
        row, numbers, ok = ec.speed_case(args.twin, args.out, name, gpus, doc, args.iters, 3, log)
        failed |= not ok
        if numbers:
            report["speed"][name] = numbers
        lines.append(row)
        print(lines[-1], flush=True)
    ec.write_results(args.out, "per_layer_layouts_check", lines, report)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
