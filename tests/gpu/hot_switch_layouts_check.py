#!/usr/bin/env python3
"""twin execute on hot-switching plans (HotSPa) whose phases run in different layouts over several GPUs: before
each phase its weights, and the gradients of the phases before it, move from the layout before into the phase's
(executor/resharding.hpp), and only the home phase (the last) steps the optimizer.

1. `twin simulate` ranks the hot-switching plans of a small Llama-shaped model (sequences of two lengths, TP 1 to
   N, PP 1 and 2, ZeRO 0 and 1) on N GPUs and writes the best one (`--plan-key`).
2. Variants of it whose phases before home run in other layouts (TP 2 with ZeRO-1, TP N, PP 2, and all in home's
   layout), each pinned in a scenario (strategy.hot_switch), simulated and run: the same sequences each step, so
   every variant's loss curve must follow the one-layout variant's within bf16 tolerance (a gradient lost or
   counted twice in a switch parts them at once).
3. Llama-2-7B widths (4 layers): the search's best hot-switching plan and the same plan with its first phase data
   parallel over every GPU (a switch of weights and gradients each step), each measured against its prediction,
   reported and folded (`twin calibrate --from-trace`).

Usage: hot_switch_layouts_check.py --twin build/twin [--out DIR] [--gpus N] [--iters N] [--profile NAME|FILE]
       [--gpu NAME]
Results: $OUT/hot_switch_layouts_check.md and .json; exit 1 when a check fails (or with fewer than 2 GPUs).
"""
import copy, csv, json, os, sys

import execute_check as ec

SEQ, SHORT, BATCH = 2048, 512, 32  # 24 sequences of 512 tokens and 8 of 2,048 per step
LAYOUT_FIELDS = ("tensor_model_parallel_size", "pipeline_model_parallel_size", "data_parallel_size", "zero_stage",
                 "sequence_parallel")


def key_of(f):
    """Strategy::key() of a phase's strategy_fields (core/strategy.cpp)."""
    return (f"tp{f['tensor_model_parallel_size']}.pp{f['pipeline_model_parallel_size']}."
            f"cp{f['context_parallel_size']}.ep{f['expert_model_parallel_size']}.dp{f['data_parallel_size']}."
            f"vpp{f['virtual_pipeline_model_parallel_size']}.{'sp' if f['sequence_parallel'] else 'nosp'}."
            f"mbs{f['micro_batch_size']}.z{f['zero_stage']}.rc-{f['recompute']}.{f['schedule']}")


def relaid(phase, gpus, tp, pp, zero):
    """The phase in layout (tp, pp, zero), data parallel over the rest; its packs padded as the phase's strategy
    pads them (strategies/hot_switch/hot_switch_workload.cpp: to a multiple of dp x micro-batch)."""
    phase = copy.deepcopy(phase)
    f = phase["strategy_fields"]
    dp = gpus // (tp * pp)
    step = dp * f["micro_batch_size"]
    padded = -(-phase["packs"] // step) * step
    f.update(tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp, data_parallel_size=dp, zero_stage=zero,
             sequence_parallel=tp > 1, num_micro_batches=padded // step,
             schedule=f["schedule"] if pp > 1 or f["schedule"] == "1f1b" else "1f1b")
    phase["padded_packs"] = padded
    phase["strategy"] = key_of(f)
    return phase


def variant(plan, gpus, layout):
    """`plan` with every phase but home in `layout` ((tp, pp, zero), or None: home's)."""
    plan = copy.deepcopy(plan)
    phases = plan["family_plan"]["detail"]["phases"]
    home = phases[-1]["strategy_fields"]
    tp, pp, zero = layout or (home["tensor_model_parallel_size"], home["pipeline_model_parallel_size"],
                              home["zero_stage"])
    for p in range(len(phases) - 1):
        phases[p] = relaid(phases[p], gpus, tp, pp, zero)
        phases[p].pop("switch_in", None)
    return plan


def search_scenario(model, gpus, seq, short, batch, short_fraction, micro_batches, recomputes):
    """A scenario of sequences of two lengths that searches hot-switching plans over TP 1..gpus, PP 1 and 2,
    ZeRO 0 and 1."""
    doc = ec.scenario("hot-switch-layouts", model, gpus, seq, batch, 1, {})
    doc.pop("strategy")
    doc["training"]["seq_length_buckets"] = [{"max": short, "fraction": short_fraction},
                                             {"max": seq, "fraction": round(1 - short_fraction, 4)}]
    doc["search"] = {"tensor_model_parallel_size": [t for t in (1, 2, 4, 8) if t <= gpus],
                     "pipeline_model_parallel_size": [1, 2], "context_parallel_size": [1],
                     "expert_model_parallel_size": [1], "virtual_pipeline_model_parallel_size": [1],
                     "sequence_parallel": [True, False], "micro_batch_size": micro_batches, "zero_stage": [0, 1],
                     "recompute": recomputes, "schedule": ["1f1b"], "hot_switch": True}
    return doc


def best_hot_switch_plan(twin, out, doc, log):
    """`twin simulate` of `doc` and its best hot-switching plan (family_plan.detail of best.json for the fastest
    hot-switch:... row), or None."""
    folder = os.path.join(out, "search")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "scenario.json")
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    if ec.run_logged([twin, "simulate", path, "--out", folder, "--quiet", "--top", "0"], log).returncode != 0:
        return None
    with open(os.path.join(folder, "ranking.csv")) as f:
        keys = [row["strategy"] for row in csv.DictReader(f)
                if row["feasible"] == "true" and row["strategy"].startswith("hot-switch:")]
    if not keys:
        return None
    best = os.path.join(out, "best-hot-switch")
    if ec.run_logged([twin, "simulate", path, "--out", best, "--quiet", "--top", "0", "--plan-key", keys[0]],
                     log).returncode != 0:
        return None
    with open(os.path.join(best, "best.json")) as f:
        return json.load(f)


def pinned(doc, plan):
    """`doc` pinning `plan`'s hot-switching plan (strategy.hot_switch), searching nothing."""
    doc = copy.deepcopy(doc)
    doc.pop("search", None)
    doc["strategy"] = {"hot_switch": plan["family_plan"]["detail"]}
    return doc


def shown(plan):
    return " > ".join(p["strategy"] for p in plan["family_plan"]["detail"]["phases"])


def main():
    args, log = ec.family_check_arguments(__doc__, "hot_switch_layouts_check", gpus=2)
    gpus = args.gpus
    report = {"gpus": gpus, "correctness": {}, "speed": {}}
    failed = gpus < 2
    lines = [f"## Hot switching between layouts on {gpus} GPUs: loss against the one-layout variant (small "
             f"Llama-shaped model; {BATCH - BATCH // 4} sequences of {SHORT} and {BATCH // 4} of {SEQ} tokens per step)",
             "", "| variant | phases (home last) | loss step 1 | loss last | max relative difference (first half / "
             "all steps) | result |", "|---|---|---|---|---|---|"]
    doc = search_scenario(ec.SMALL, gpus, SEQ, SHORT, BATCH, 0.75, [1, 2], ["none"])
    plan = best_hot_switch_plan(args.twin, os.path.join(args.out, "small"), doc, log)
    if plan is None:
        lines.append("| search | FAILED: no hot-switching plan ranked | | | | |")
        ec.write_results(args.out, "hot_switch_layouts_check", lines, report)
        return 1
    baseline = None
    for name, layout in [("one-layout", None), ("tp2-zero1", (2, 1, 1)), (f"tp{gpus}", (gpus, 1, 0)),
                         ("pp2", (1, 2, 0))]:
        edited = variant(plan, gpus, layout)
        metrics = ec.run_case(args.twin, args.out, name, pinned(doc, edited), args.iters, 2, log)
        if metrics is None:
            failed = True
            lines.append(f"| {name} | {shown(edited)} | | | | FAILED to run |")
            print(lines[-1], flush=True)
            continue
        losses = [s["loss"] for s in metrics["steps"]]
        baseline = baseline or losses
        row, numbers, ok = ec.curve_row(name, [shown(edited)], losses, baseline, args.tolerance)
        failed |= not ok
        report["correctness"][name] = dict(numbers, phases=shown(edited))
        lines.append(row)
        print(row, flush=True)

    # Llama-2-7B widths, 4 layers: 16 sequences of 1,024 tokens and 2 of 16,384 per step. The search's best
    # hot-switching plan, and the same with its first phase data parallel over every GPU under ZeRO-1.
    lines += ["", f"## Llama-2-7B widths, 4 layers, 16 sequences of 1,024 and 2 of 16,384 tokens per step on {gpus} "
              "GPUs: measured against predicted (the pinned plan simulated), traced, reported and folded", "",
              *ec.SPEED_TABLE]
    doc = search_scenario(ec.LLAMA7B_4L, gpus, 16384, 1024, 18, 0.8889, [1, 2, 4], ["none", "selective", "full"])
    plan = best_hot_switch_plan(args.twin, os.path.join(args.out, "7b4l"), doc, log)
    cases = [] if plan is None else [("7b4l-searched", plan), ("7b4l-first-phase-dp", variant(plan, gpus, (1, 1, 1)))]
    failed |= plan is None
    for name, case in cases:
        row, numbers, ok = ec.speed_case(args.twin, args.out, name, gpus, pinned(doc, case), 8, 3, log)
        failed |= not ok
        if numbers:
            report["speed"][name] = dict(numbers, phases=shown(case))
        lines.append(row)
        print(lines[-1], flush=True)
    lines += ["", "Each part's switch into its layout, from the part's start to its last transfer (the slowest GPU; "
              "metrics.json ranks[].switch):", "", "| case | part | measured ms | predicted ms |", "|---|---|---|---|"]
    for name, numbers in report["speed"].items():
        parts = {}
        for rank in numbers["metrics"]["ranks"]:
            if "switch" in rank:
                measured, predicted = parts.get(rank["part"], (0, 0))
                parts[rank["part"]] = (max(measured, rank["switch"]["median_s"]),
                                       max(predicted, rank["switch"]["predicted_s"]))
        for part, (measured, predicted) in sorted(parts.items()):
            lines.append(f"| {name} | {part} | {1e3 * measured:.2f} | {1e3 * predicted:.2f} |")
    for name, case in cases:
        lines.append(f"\n{name}: `{shown(case)}`")
    ec.write_results(args.out, "hot_switch_layouts_check", lines, report)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
