#!/usr/bin/env python3
"""An MoE run priced again with its own routing: for each `twin execute` run folder (best.json, metrics.json and
measured/rank0.json), its scenario with model.moe.routing set to {"distribution": "measured", "histogram": the run's
rank file} simulated for the run's plan (tools/repredict_runs.py's plan_step_s), beside the blind prediction and the
measured step. Prints a markdown table; exits 1 when a run cannot be priced.
    python3 tests/gpu/reprice_measured_routing.py TWIN RUN...   (tests/gpu/expert_capacity_device.sh calls it)"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from repredict_runs import plan_step_s  # noqa: E402


def reprice(twin, run, work):
    best = json.load(open(os.path.join(run, "best.json")))
    metrics = json.load(open(os.path.join(run, "metrics.json")))
    scenario = best["scenario"]
    scenario["model"]["moe"].pop("routing_imbalance", None)
    scenario["model"]["moe"]["routing"] = {"distribution": "measured",
                                           "histogram": os.path.abspath(os.path.join(run, "measured", "rank0.json"))}
    name = os.path.basename(os.path.normpath(run))
    path = os.path.join(work, name + ".json")
    json.dump(scenario, open(path, "w"))
    repriced = plan_step_s(twin, path, best["strategy_key"])
    if repriced is None:
        raise ValueError(f"twin simulate did not price {best['strategy_key']}")
    return name, metrics["measured"]["iteration_s"], metrics["predicted"]["iteration_time_s"], repriced


def main(twin, runs):
    print("| run | measured step s | blind s | error | with its own routing s | error |")
    print("| --- | --- | --- | --- | --- | --- |")
    status = 0
    with tempfile.TemporaryDirectory() as work:
        for run in runs:
            try:
                name, measured, blind, own = reprice(twin, run, work)
            except (OSError, KeyError, ValueError) as error:
                print(f"| {run} | FAILED: {error} | | | | |")
                status = 1
                continue
            print(f"| {name} | {measured:.4f} | {blind:.4f} | {100 * (measured / blind - 1):+.1f}% | {own:.4f} | "
                  f"{100 * (measured / own - 1):+.1f}% |")
    return status


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2:]))
