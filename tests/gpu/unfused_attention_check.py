#!/usr/bin/env python3
"""twin execute of unfused attention (Megatron-LM's kernels, gpu/unfused_attention.hpp) on one GPU (issue 42 item 4):
GPT-style models as the 2021-22 Megatron-LM runs of the published table configured them (`attention_backend`
unfused), each a pinned plan against the same model with fused attention.

Correctness, GPT-2-medium widths (scenarios/gpt-small-1xH200.json's model, 4 layers, sequence 1024, micro-batch 4):
unfused attention with recompute none, selective (the scores dropped after the forward and made again) and full
against the fused curve, held step by step within --tolerance and falling; with attention dropout 0.1 (the unfused
run draws its own masks) against the fused run with dropout, by the mean loss of the second half.
Speed and memory, GPT-3 1.7B widths (Narayanan et al. 2021 Table 1's first row: hidden 2304, 24 heads of 96, sequence
2048), 4 layers, micro-batch 4, fused and unfused: measured iteration time and peak against twin simulate's.
Results: OUT/unfused_attention_check/unfused_attention_check.md and .json.
Usage: unfused_attention_check.py --twin build/twin [--iters 40] [--tolerance 0.02] [--profile h200-x1]
"""
import json, os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import execute_check as ec  # noqa: E402

SCENARIO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scenarios", "gpt-small-1xH200.json")
GPT3_1_7B = {"preset": "gpt3-175b", "num_layers": 4, "hidden_size": 2304, "ffn_hidden_size": 9216,
             "num_attention_heads": 24, "num_query_groups": 24, "kv_channels": 96, "vocab_size": 51200,
             "max_position_embeddings": 2048, "hidden_dropout": 0.0, "attention_dropout": 0.0}

# (name, the model's changes, strategy fields, the case it is held against: None for a baseline)
CURVES = [
    ("fused", {}, {}, None),
    ("unfused", {"attention_backend": "unfused"}, {}, "fused"),
    ("unfused-selective", {"attention_backend": "unfused"}, {"recompute": "selective"}, "fused"),
    ("unfused-full", {"attention_backend": "unfused"}, {"recompute": "full"}, "fused"),
    ("fused-dropout", {"attention_dropout": 0.1}, {}, None),
    ("unfused-dropout", {"attention_backend": "unfused", "attention_dropout": 0.1}, {}, "fused-dropout"),
]
# (name, the model's changes, strategy and framework fields)
SPEED = [("gpt3-1.7b-fused", {"attention_backend": "fused"}, {}),
         ("gpt3-1.7b-unfused", {"attention_backend": "unfused"}, {})]


def speed_cases(args, log, cases, lines, report):
    """GPT-3 1.7B-width plans run for speed (ec.speed_case): the table's rows appended to `lines`, the numbers to
    report["speed"]; whether every case passed."""
    lines += ["", "## GPT-3 1.7B widths, 4 layers, sequence 2048, micro-batch 4: measured against twin simulate", "",
              *ec.SPEED_TABLE]
    ok_all = True
    for name, changes, fields in cases:
        doc = ec.scenario(name, {**GPT3_1_7B, **changes}, 1, 2048, 16, 4, fields)
        row, numbers, ok = ec.speed_case(args.twin, args.out, name, 1, doc, args.iters // 2, 3, log)
        lines.append(row)
        report["speed"][name] = numbers
        ok_all &= ok
    return ok_all


def curve_cases(args, model, log, lines, report):
    """The correctness table's rows; whether every case passed."""
    curves, ok_all = {}, True
    for name, changes, fields, against in CURVES:
        doc = ec.scenario(name, {**model, **changes}, 1, 1024, 16, 4, fields)
        metrics = ec.run_case(args.twin, args.out, name, doc, args.iters, 2, log)
        if metrics is None:
            lines.append(f"| {name} | | | | | FAILED to run |")
            ok_all = False
            continue
        losses = curves[name] = [s["loss"] for s in metrics["steps"]]
        measured, predicted = metrics["measured"]["iteration_s"], metrics["predicted"]["iteration_time_s"]
        if against is None or against not in curves:
            ok, held = losses[-1] < 0.8 * losses[0], "baseline"
        elif "dropout" in name:  # other masks: the same training, not the same steps
            difference = ec.second_half_mean_difference(losses, curves[against])
            ok, held = difference <= args.tolerance and losses[-1] < 0.8 * losses[0], f"{difference:.2e} (mean)"
        else:
            first_half, whole, ok = ec.dense_curve_check(losses, curves[against], args.tolerance)
            held = f"{first_half:.2e} / {whole:.2e}"
        report["correctness"][name] = {"losses": losses, "held_against": against, "difference": held,
                                       "iteration_s": measured, "predicted_iteration_s": predicted,
                                       "peak_GiB": max(r["peak_memory_GiB"] for r in metrics["ranks"]),
                                       "predicted_peak_GiB": max(r["predicted_peak_memory_GiB"]
                                                                 for r in metrics["ranks"]), "ok": ok}
        lines.append(f"| {name} | {against or ''} | {losses[0]:.4f} | {losses[-1]:.4f} | {held} | "
                     f"{measured:.4f} (predicted {predicted:.4f}) | {'pass' if ok else 'FAIL'} |")
        ok_all &= ok
    return ok_all


def main():
    ec.PROFILE = "h200-x1"
    args, log = ec.family_check_arguments(__doc__, "unfused_attention_check")
    args.iters = 40 if args.iters == 12 else args.iters  # the family default of 12 is too short for a curve
    with open(SCENARIO) as f:
        model = json.load(f)["model"]
    lines = ["## Unfused attention against fused, GPT-2-medium widths, one GPU", "",
             "| case | held against | loss step 1 | loss last | max relative difference (first half / all) | "
             "iteration s | result |", "|---|---|---|---|---|---|---|"]
    report = {"correctness": {}, "speed": {}}
    ok_all = curve_cases(args, model, log, lines, report)
    ok_all &= speed_cases(args, log, SPEED, lines, report)
    ec.write_results(args.out, "unfused_attention_check", lines, report)
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
