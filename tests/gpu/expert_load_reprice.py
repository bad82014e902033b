#!/usr/bin/env python3
"""Re-price executed MoE runs (twin execute's run folders: metrics.json, ops.csv) with a twin binary, without a GPU:
each run's plan simulated under three routings of its scenario, the routed experts' grouped GEMMs (roles expert_fc1,
expert_fc2, all passes, rank 0) and the step compared with what the run measured:
  stated   the scenario as shipped (what a user knows before running: here no routing, so balanced)
  aux_loss model.moe.routing {"distribution": "aux_loss"}: the scenario's "softmax routing with a balancing loss"
  run      {"distribution": "zipf"} with the exponent whose busiest expert carries the run's measured busiest-expert
           load over the mean (metrics.json moe_routing.imbalance_mean, over its layers and micro-batches): the run's
           loads as far as the run recorded them (its per-expert histograms were not archived)
With --clock MHZ the profile's sustained_sm_clock_MHz is set to MHZ (the clock the runs held) so that the op prices
compare with the ops as they ran; without it the profile prices as shipped.
Usage: python3 tests/gpu/expert_load_reprice.py TWIN PROFILE_JSON [--clock MHZ] SCENARIO_DIR RUN... > table.md"""
import csv
import glob
import json
import os
import subprocess
import sys
import tempfile

EXPERT_ROLES = ("expert_fc1", "expert_fc2")


def zipf_exponent_for(experts, busiest_over_mean):
    """As core/moe_routing.cpp's: the exponent whose first share is busiest_over_mean / experts."""
    low, high = 0.0, 16.0
    for _ in range(60):
        mid = (low + high) / 2
        shares = [(i + 1) ** -mid for i in range(experts)]
        if shares[0] / sum(shares) * experts < busiest_over_mean:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def measured_expert_ns(ops_csv):
    total = 0.0
    with open(ops_csv) as f:
        for row in csv.DictReader(f):
            if row["rank"] == "0" and row["role"] in EXPERT_ROLES and row["measured_median_ns"]:
                total += float(row["measured_median_ns"])
    return total


def predicted(twin, profile, scenario, plan, work):
    out = os.path.join(work, "out")
    subprocess.run([twin, "simulate", scenario, "--profile", profile, "--out", out, "--quiet", "--top", "1",
                    "--plan-key", plan], check=True, stdout=subprocess.DEVNULL)
    trace = glob.glob(os.path.join(out, "traces", "top1_*.json"))[0]
    with open(trace) as f:
        events = json.load(f)
    events = events["traceEvents"] if isinstance(events, dict) else events
    expert_ns = sum(e["dur"] * 1e3 for e in events if e.get("ph") == "X" and e.get("pid") == 0
                    and e["name"].split(".")[1:2] in ([r] for r in EXPERT_ROLES))
    with open(os.path.join(out, "best.json")) as f:
        step_s = json.load(f)["predicted"]["iteration_time_s"]
    return expert_ns, step_s


def routings(metrics):
    experts = metrics["moe_routing"]["num_experts"]
    busiest = metrics["moe_routing"]["imbalance_mean"]
    return [("stated", None), ("aux_loss", {"distribution": "aux_loss"}),
            (f"run ({busiest:.2f}x)", {"distribution": "zipf",
                                        "exponent": round(zipf_exponent_for(experts, busiest), 6)})]


def main(args):
    if len(args) < 4:
        sys.exit(__doc__)
    twin, profile_path, args = args[0], args[1], args[2:]
    clock = None
    if args[0] == "--clock":
        clock, args = float(args[1]), args[2:]
    scenario_dir, runs = args[0], args[1:]
    print("| run | routing | expert GEMMs measured ms | predicted ms | measured / predicted | step measured s | "
          "predicted s | measured / predicted - 1 |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as work:
        with open(profile_path) as f:
            profile = json.load(f)
        if clock:
            for gpu in profile["gpus"]:
                gpu["sustained_sm_clock_MHz"] = clock
        profile_file = os.path.join(work, "profile.json")
        with open(profile_file, "w") as f:
            json.dump(profile, f)
        for run in runs:
            with open(os.path.join(run, "metrics.json")) as f:
                metrics = json.load(f)
            name = os.path.basename(os.path.normpath(run))
            with open(os.path.join(scenario_dir, name + ".json")) as f:
                scenario = json.load(f)
            measured_ns = measured_expert_ns(os.path.join(run, "ops.csv"))
            measured_s = metrics["measured"]["iteration_s"]
            for label, routing in routings(metrics):
                variant = json.loads(json.dumps(scenario))
                if routing:
                    variant["model"]["moe"]["routing"] = routing
                scenario_file = os.path.join(work, "scenario.json")
                with open(scenario_file, "w") as f:
                    json.dump(variant, f)
                expert_ns, step_s = predicted(twin, profile_file, scenario_file, metrics["plan"], work)
                print(f"| {name} | {label} | {measured_ns / 1e6:.3f} | {expert_ns / 1e6:.3f} | "
                      f"{measured_ns / expert_ns:.2f} | {measured_s:.4f} | {step_s:.4f} | "
                      f"{(measured_s / step_s - 1) * 100:+.1f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
