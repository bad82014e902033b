#!/usr/bin/env python3
"""twin execute of the cross-entropy without fusion (Megatron-LM's passes over an fp32 copy of the logits,
core/unfused_loss.hpp) on one GPU (issue 42 item 4): GPT-style models as the published runs that state
`framework.cross_entropy_loss_fusion` false configured them, each a pinned plan against the fused loss.

Correctness, GPT-2-medium widths (scenarios/gpt-small-1xH200.json's model, 4 layers, sequence 1024, micro-batch 4,
vocabulary 50,257): the unfused loss with recompute none and full against the fused curve, its first half held step
by step within --tolerance, its second half by its mean (there the model memorises its short stream and the fused
run's own curve moves by up to 1.5% from lease to lease: cuDNN's attention backward adds with atomics), and falling;
peaks against the fused run's, measured and predicted.
Speed and memory, GPT-3 1.7B widths (hidden 2304, 24 heads of 96, sequence 2048, vocabulary 51,200), 4 layers,
micro-batch 4: the fused loss, the unfused loss, and the unfused loss with unfused attention (2021 Megatron-LM's
kernels): measured iteration time and peak against twin simulate's.
Results: OUT/unfused_loss_check/unfused_loss_check.md and .json.
Usage: unfused_loss_check.py --twin build/twin [--iters 40] [--tolerance 0.02] [--profile h200-x1]
"""
import json, os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import execute_check as ec  # noqa: E402
from unfused_attention_check import SCENARIO, speed_cases  # noqa: E402

UNFUSED = {"cross_entropy_loss_fusion": False}
CURVES = [("fused-loss", {}), ("unfused-loss", {"framework": UNFUSED}),
          ("unfused-loss-full", {"framework": UNFUSED, "recompute": "full"})]
SPEED = [("gpt3-1.7b-fused-loss", {}, {}),
         ("gpt3-1.7b-unfused-loss", {}, {"framework": UNFUSED}),
         ("gpt3-1.7b-unfused-loss-attention", {"attention_backend": "unfused"}, {"framework": UNFUSED})]


def peaks(metrics):
    return (max(r["peak_memory_GiB"] for r in metrics["ranks"]),
            max(r["predicted_peak_memory_GiB"] for r in metrics["ranks"]))


def curve_cases(args, log, model, cases, lines, report, first_half_tolerance=None, second_half_tolerance=None):
    """Each (name, strategy fields) case on GPT-2-medium widths at sequence 1024, micro-batch 4 (four micro-batches),
    held against the first: its first half step by step within `first_half_tolerance` (default --tolerance) and its
    second half by its mean within `second_half_tolerance` (default --tolerance), and falling. The table's rows appended to `lines`, the numbers to
    report["correctness"]; whether every case passed."""
    lines += ["| case | loss step 1 | loss last | max relative difference (first half / all) | second half's mean "
              "| iteration s | peak GiB (predicted) | result |", "|---|---|---|---|---|---|---|---|"]
    baseline, ok_all = None, True
    for name, fields in cases:
        metrics = ec.run_case(args.twin, args.out, name, ec.scenario(name, model, 1, 1024, 16, 4, fields),
                              args.iters, 2, log)
        if metrics is None:
            lines.append(f"| {name} | | | | | | | FAILED to run |")
            ok_all = False
            continue
        losses = [s["loss"] for s in metrics["steps"]]
        baseline = baseline or losses
        first_half, whole = ec.curve_differences(losses, baseline)
        second_half = ec.second_half_mean_difference(losses, baseline)
        ok = (first_half <= (first_half_tolerance or args.tolerance)
              and second_half <= (second_half_tolerance or args.tolerance) and losses[-1] < 0.8 * losses[0])
        measured, predicted = metrics["measured"]["iteration_s"], metrics["predicted"]["iteration_time_s"]
        peak, predicted_peak = peaks(metrics)
        report["correctness"][name] = {"losses": losses, "max_relative_difference": whole,
                                       "second_half_mean_difference": second_half, "iteration_s": measured,
                                       "predicted_iteration_s": predicted, "peak_GiB": peak,
                                       "predicted_peak_GiB": predicted_peak, "ok": ok}
        lines.append(f"| {name} | {losses[0]:.4f} | {losses[-1]:.4f} | {first_half:.2e} / {whole:.2e} | {second_half:.2e} | "
                     f"{measured:.4f} (predicted {predicted:.4f}) | {peak:.3f} ({predicted_peak:.3f}) | "
                     f"{'pass' if ok else 'FAIL'} |")
        ok_all &= ok
    return ok_all


def gpt2_medium_model():
    with open(SCENARIO) as f:
        return json.load(f)["model"]


def curve_and_speed_check(doc, stem, title, curves, speed, first_half_tolerance=None):
    """A one-GPU check of GPT-2-medium curves (curve_cases, under `title`) and GPT-3 1.7B speed cases (speed_cases):
    the results written to OUT/STEM/STEM.{md,json}; the exit status."""
    ec.PROFILE = "h200-x1"
    args, log = ec.family_check_arguments(doc, stem)
    args.iters = 40 if args.iters == 12 else args.iters
    lines, report = [title, ""], {"correctness": {}, "speed": {}}
    ok_all = curve_cases(args, log, gpt2_medium_model(), curves, lines, report, first_half_tolerance)
    ok_all &= speed_cases(args, log, speed, lines, report)
    ec.write_results(args.out, stem, lines, report)
    return 0 if ok_all else 1


def main():
    return curve_and_speed_check(__doc__, "unfused_loss_check",
                                 "## The loss without fusion against the fused loss, GPT-2-medium widths, one GPU",
                                 CURVES, SPEED)


if __name__ == "__main__":
    sys.exit(main())
