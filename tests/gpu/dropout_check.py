#!/usr/bin/env python3
"""twin execute of a GPT-style model with hidden and attention dropout (issue 42): scenarios/gpt-small-1xH200.json's
model (GPT-2-medium widths, 4 layers, LayerNorm, biases, learned positions, GeLU, tied embeddings) with hidden_dropout
0.1 (Megatron's bias-dropout-add after attention and MLP, and the embedding's dropout) and attention_dropout 0.1
(inside cuDNN's fused attention, docs/EXECUTOR.md "Dropout").

Cases, each a pinned plan (micro-batch 4, global batch 16 of sequence 1024, --iters steps):
  no-dropout        hidden_dropout 0: the reference curve without dropout
  dropout           hidden_dropout 0.1 on one GPU: the dropout curve; within --early-tolerance of no-dropout over the
                    first 5 steps, falling, and its second half's mean loss reported against no-dropout's
  dropout-full      full recompute: the recomputed forward draws the same masks (same key), so the curve is the
                    dropout curve within --tolerance
  dropout-tp2-sp    (--gpus 2) TP 2 with SP: each element's mask is a function of its place in the batch, so the
  dropout-dp2       (--gpus 2) DP 2    curves are the one-GPU dropout curve within --tolerance over the first half
                    (the whole curve's difference reported: a curve falling from 11 to 1 amplifies a last bit late)
  attention-dropout          attention_dropout 0.1 as well, one GPU: within --early-tolerance of dropout over the
                             first 5 steps, falling
  attention-dropout-full     full recompute: the recomputed attention draws its mask again from the same seed, so the
                             curve is attention-dropout's within --tolerance
  attention-dropout-tp2-sp   (--gpus 2) TP 2 with SP: each GPU draws its heads' masks from a seed of its own (as
                             Megatron's per-TP-rank generator), not the one-GPU run's, so it is held to
                             attention-dropout within --early-tolerance over the first 5 steps only
Every case runs cuDNN's deterministic attention (--attention cudnn-deterministic).
Measured iteration time against twin simulate's prediction for each. Results: OUT/dropout_check/dropout_check.md, .json.
Usage: dropout_check.py --twin build/twin [--gpus 2] [--iters 40] [--tolerance 0.02] [--early-tolerance 0.05]
"""
import json, os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import execute_check as ec  # noqa: E402

SCENARIO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scenarios", "gpt-small-1xH200.json")

# (name, GPUs, hidden dropout, attention dropout, strategy fields, the curve it is held to, held over the first 5
# steps at --early-tolerance (else over the first half at --tolerance))
TP2_SP = {"tensor_model_parallel_size": 2, "sequence_parallel": True}
CASES = [
    ("no-dropout", 1, 0.0, 0.0, {}, None, False),
    ("dropout", 1, 0.1, 0.0, {}, "no-dropout", True),
    ("dropout-full", 1, 0.1, 0.0, {"recompute": "full"}, "dropout", False),
    ("dropout-tp2-sp", 2, 0.1, 0.0, TP2_SP, "dropout", False),
    ("dropout-dp2", 2, 0.1, 0.0, {}, "dropout", False),
    ("attention-dropout", 1, 0.1, 0.1, {}, "dropout", True),
    ("attention-dropout-full", 1, 0.1, 0.1, {"recompute": "full"}, "attention-dropout", False),
    ("attention-dropout-tp2-sp", 2, 0.1, 0.1, TP2_SP, "attention-dropout", True),
]


def early_difference(losses, baseline, steps=5):
    return max(abs(a - b) / b for a, b in zip(losses[:steps], baseline[:steps]))


def second_half_mean(losses):
    half = losses[len(losses) // 2:]
    return sum(half) / len(half)


def main():
    ec.PROFILE = "h200-x1"
    ec_args = sys.argv
    early_tolerance = 0.05
    if "--early-tolerance" in ec_args:
        i = ec_args.index("--early-tolerance")
        early_tolerance = float(ec_args[i + 1])
        del ec_args[i:i + 2]
    args, log = ec.family_check_arguments(__doc__, "dropout_check")
    args.iters = 40 if args.iters == 12 else args.iters
    with open(SCENARIO) as f:
        model = json.load(f)["model"]
    lines = ["## GPT-style model with hidden and attention dropout 0.1: loss curves", "",
             "| case | GPUs | loss step 1 | loss last | second-half mean | against | max relative difference "
             "(first 5 / first half / all) | iteration s (predicted) | result |", "|---|---|---|---|---|---|---|---|---|"]
    report, curves, failed = {"cases": {}}, {}, False
    for name, gpus, dropout, attention_dropout, fields, against, early in CASES:
        if gpus > args.gpus or not ec.selected(args, name):
            continue
        doc = ec.scenario(name, dict(model, hidden_dropout=dropout, attention_dropout=attention_dropout), gpus, 1024,
                          16, 4, fields)
        metrics = ec.run_case(args.twin, args.out, name, doc, args.iters, 2, log, ec.DETERMINISTIC_ATTENTION)
        if metrics is None:
            failed = True
            lines.append(f"| {name} | {gpus} | | | | | | | FAILED to run |")
            continue
        losses = [s["loss"] for s in metrics["steps"]]
        curves[name] = losses
        measured, predicted = metrics["measured"]["iteration_s"], metrics["predicted"]["iteration_time_s"]
        falls = losses[-1] < 0.8 * losses[0]
        tolerance = early_tolerance if early else args.tolerance
        first, half, whole = 0.0, 0.0, 0.0
        ok = falls
        if against is not None and against in curves:
            first = early_difference(losses, curves[against])
            half, whole = ec.curve_differences(losses, curves[against])
            ok = ok and (first <= tolerance if early else half <= tolerance)
        report["cases"][name] = {"gpus": gpus, "hidden_dropout": dropout, "attention_dropout": attention_dropout,
                                 "losses": losses, "against": against,
                                 "max_relative_difference_first_5": first,
                                 "max_relative_difference_first_half": half, "max_relative_difference": whole,
                                 "second_half_mean": second_half_mean(losses), "iteration_s": measured,
                                 "predicted_iteration_s": predicted, "ok": ok}
        lines.append(f"| {name} | {gpus} | {losses[0]:.4f} | {losses[-1]:.4f} | {second_half_mean(losses):.4f} | "
                     f"{against or ''} | {first:.2e} / {half:.2e} / {whole:.2e} | {measured:.4f} ({predicted:.4f}) | "
                     f"{'pass' if ok else 'FAIL'} |")
        failed |= not ok
    report["ok"] = not failed
    ec.write_results(args.out, "dropout_check", lines, report)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
