#!/usr/bin/env python3
"""The power model against measured training steps (issue 37 item 1, issue 40): for each run folder of
tests/gpu/moe_clock_device.sh (best.json, metrics.json, gpu_clocks.csv, ops.csv), the run's plan (its scenario with
its strategy pinned) simulated by `twin simulate` with PROFILE (after) and with BEFORE, each class's clock and power
read off the simulator's debug line (SPDLOG_LEVEL=debug, sim/step_clock.cpp), beside the run's measured step time and
its busy samples' median SM clock and power (utilisation >= 90%), and the power model's power at the measured clock
with the work per second of the run's own measured op times (ops.csv: the passes' compute kernels, the optimizer step
left out): what the model says once the simulator's op times are out of the way. Prints a markdown table and the
mean and max |error| before and after (docs/ACCURACY.md "The power model").
Usage: python3 tests/gpu/power_clock_check.py TWIN PROFILE BEFORE RUN_DIR [RUN_DIR...]"""
import csv, json, os, re, statistics, subprocess, sys, tempfile

CLOCK = re.compile(r"step clock of rank class 0: (\d+) MHz(?: at (\d+) W by the power model \((\d+) W at its maximum "
                   r"\d+ MHz; ([\d.]+) TFLOP and ([\d.]+) GB)?")


def priced(twin, run, profile):
    plan = json.load(open(os.path.join(run, "best.json")))
    scenario = plan["scenario"]
    scenario.pop("search", None)
    scenario["strategy"] = plan["strategy"]
    with tempfile.TemporaryDirectory() as work:
        path = os.path.join(work, "scenario.json")
        json.dump(scenario, open(path, "w"))
        done = subprocess.run([twin, "simulate", path, "--profile", profile, "--out", os.path.join(work, "out"),
                               "--top", "0", "--jobs", "1"], capture_output=True, text=True, check=True,
                              env=dict(os.environ, SPDLOG_LEVEL="debug"))
        iteration_s = json.load(open(os.path.join(work, "out", "best.json")))["predicted"]["iteration_ns"] * 1e-9
    match = CLOCK.search(done.stdout + done.stderr)
    if not match:
        raise SystemExit(f"{run}: no step-clock line from twin simulate with {profile}")
    clock = {"clock_MHz": float(match.group(1))}
    if match.group(2):
        clock.update(power_W=float(match.group(2)), power_at_max_W=float(match.group(3)),
                     tflop=float(match.group(4)), gb=float(match.group(5)))
    return iteration_s, clock


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
    twin, profile, before = sys.argv[1:4]
    print("| run | measured s | busy samples | measured clock, power | predicted clock, power (at max) "
          "| predicted s (after) | error | before: clock, s | error | model W at the measured clock, measured ops (TFLOP/s) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    errors_after, errors_before = [], []
    for run in sys.argv[4:]:
        step_s, mhz, watts, samples = measured(run)
        after_s, after = priced(twin, run, profile)
        before_s, earlier = priced(twin, run, before)
        errors_after.append(100 * (step_s / after_s - 1))
        errors_before.append(100 * (step_s / before_s - 1))
        power = f"{after['power_W']:.0f} W ({after['power_at_max_W']:.0f})" if "power_W" in after else "no power model"
        measured_ops = ("{:.0f} W ({:.0f})".format(*power_with_measured_ops(run, profile, after, mhz))
                        if "power_W" in after else "")
        print(f"| {os.path.basename(os.path.normpath(run))} | {step_s:.4f} | {samples} | {mhz:.0f} MHz, {watts:.0f} W | "
              f"{after['clock_MHz']:.0f} MHz, {power} | {after_s:.4f} | {errors_after[-1]:+.1f}% | "
              f"{earlier['clock_MHz']:.0f} MHz, {before_s:.4f} | {errors_before[-1]:+.1f}% | {measured_ops} |")
    for name, errors in (("before", errors_before), ("after", errors_after)):
        print(f"{name}: mean |error| {statistics.mean(abs(e) for e in errors):.1f}%, "
              f"max {max(abs(e) for e in errors):.1f}%")


if __name__ == "__main__":
    main()
