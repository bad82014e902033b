#!/usr/bin/env python3
"""The power model against measured training steps (issue 37 item 1, issue 40): for each run folder of
tests/gpu/moe_clock_device.sh (best.json, metrics.json, gpu_clocks.csv), the run's plan priced with PROFILE (after)
and with BEFORE by tests/gpu/power_loads/step_clock_of_plan (the plan lowered and replayed as twin simulate does, with
each class's clock and the power model's power), beside the run's measured step time and its busy samples' median SM
clock and power (utilisation >= 90%), and the power model's power at the measured clock with the work per second of
the run's own measured op times (ops.csv: the passes' compute kernels, the optimizer step left out): what the model
says once the simulator's op times are out of the way. Prints a markdown table (docs/ACCURACY.md "The power model").
Usage: python3 tests/gpu/power_clock_check.py STEP_CLOCK_OF_PLAN PROFILE BEFORE RUN_DIR [RUN_DIR...]"""
import csv, json, os, statistics, subprocess, sys


def priced(tool, run, profile):
    done = subprocess.run([tool, os.path.join(run, "best.json"), profile], capture_output=True, text=True, check=True)
    result = json.loads(done.stdout)
    return result["iteration_s"], result["classes"][0]


def measured(run):
    metrics = json.load(open(os.path.join(run, "metrics.json")))
    rows = [[c.strip() for c in r] for r in csv.reader(open(os.path.join(run, "gpu_clocks.csv")))]
    busy = [r for r in rows if len(r) >= 4 and float(r[3]) >= 90]
    return (metrics["measured"]["iteration_s"], statistics.median(float(r[1]) for r in busy),
            statistics.median(float(r[2]) for r in busy), len(busy))


def power_with_measured_ops(run, profile, work, clock_MHz):
    model = next(g["power_model"] for g in json.load(open(profile))["gpus"] if "power_model" in g)
    rows = list(csv.DictReader(open(os.path.join(run, "ops.csv"))))
    busy_s = sum(float(r["measured_median_ns"] or 0) for r in rows
                 if r["phase"] != "optimizer" and r["stream"] == "compute") * 1e-9
    scale = (clock_MHz / model["max_sm_clock_MHz"]) ** model["clock_exponent"]
    dynamic = model["pJ_per_flop"] * work["tflop"] + model["pJ_per_byte"] * 1e-3 * work["gb"]  # J per step
    return model["static_W"] + scale * dynamic / busy_s, work["tflop"] / busy_s


def main():
    tool, profile, before = sys.argv[1:4]
    print("| run | measured s | busy samples | measured clock, power | predicted clock, power (at max) "
          "| predicted s (after) | error | before: clock, s | error | model W at the measured clock, measured ops (TFLOP/s) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for run in sys.argv[4:]:
        step_s, mhz, watts, samples = measured(run)
        after_s, after = priced(tool, run, profile)
        before_s, earlier = priced(tool, run, before)
        power = f"{after['power_W']:.0f} W ({after['power_at_max_W']:.0f})" if "power_W" in after else "no power model"
        print(f"| {os.path.basename(os.path.normpath(run))} | {step_s:.4f} | {samples} | {mhz:.0f} MHz, {watts:.0f} W | "
              f"{after['clock_MHz']:.0f} MHz, {power} | {after_s:.4f} | {100 * (step_s / after_s - 1):+.1f}% | "
              f"{earlier['clock_MHz']:.0f} MHz, {before_s:.4f} | {100 * (step_s / before_s - 1):+.1f}% | "
              "{:.0f} W ({:.0f}) |".format(*power_with_measured_ops(run, profile, after, mhz)))


if __name__ == "__main__":
    main()
