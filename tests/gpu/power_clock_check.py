#!/usr/bin/env python3
"""The power model against measured training steps (issue 37 item 1, issue 40): for each run folder of
tests/gpu/moe_clock_device.sh (best.json, metrics.json, gpu_clocks.csv), the run's plan simulated with PROFILE
(twin simulate of the plan pinned as the scenario's strategy, SPDLOG_LEVEL=debug for sim/step_clock's line: the
clock and power the power model gives the step) and with BEFORE (the same plan, the shipped profile's pricing),
beside the run's measured step time and its busy samples' median SM clock and power (utilisation >= 90%).
Usage: python3 tests/gpu/power_clock_check.py TWIN PROFILE BEFORE RUN_DIR [RUN_DIR...]
Prints a markdown table."""
import csv, json, os, re, statistics, subprocess, sys, tempfile

LINE = re.compile(r"step clock of rank class 0: (\d+) MHz at (\d+) W by the power model \((\d+) W at its maximum")


def simulate(twin, plan, profile, work):
    scenario = dict(plan["scenario"])
    scenario.pop("search", None)
    scenario["strategy"] = plan["strategy"]
    path = os.path.join(work, "scenario.json")
    with open(path, "w") as f:
        json.dump(scenario, f)
    out = os.path.join(work, "sim")
    env = dict(os.environ, SPDLOG_LEVEL="debug")
    done = subprocess.run([twin, "simulate", path, "--profile", profile, "--out", out, "--quiet", "--top", "0"],
                          capture_output=True, text=True, env=env, check=True)
    predicted = json.load(open(os.path.join(out, "best.json")))["predicted"]["iteration_time_s"]
    found = LINE.search(done.stderr + done.stdout)
    return predicted, (int(found.group(1)), int(found.group(2)), int(found.group(3))) if found else None


def measured(run):
    metrics = json.load(open(os.path.join(run, "metrics.json")))
    rows = [[c.strip() for c in r] for r in csv.reader(open(os.path.join(run, "gpu_clocks.csv")))]
    busy = [r for r in rows if len(r) >= 4 and float(r[3]) >= 90]
    return (metrics["measured"]["iteration_s"], statistics.median(float(r[1]) for r in busy),
            statistics.median(float(r[2]) for r in busy), len(busy))


def main():
    twin, profile, before = sys.argv[1:4]
    print("| run | measured s | busy samples | measured MHz | predicted MHz | measured W | predicted W (at max clock) "
          "| predicted s, power model | error | predicted s, before | error |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for run in sys.argv[4:]:
        plan = json.load(open(os.path.join(run, "best.json")))
        step_s, mhz, watts, samples = measured(run)
        with tempfile.TemporaryDirectory() as work:
            after_s, clock = simulate(twin, plan, profile, work)
        with tempfile.TemporaryDirectory() as work:
            before_s, _ = simulate(twin, plan, before, work)
        clock_text = f"{clock[0]}" if clock else "n/a"
        power_text = f"{clock[1]} ({clock[2]})" if clock else "n/a"
        print(f"| {os.path.basename(os.path.normpath(run))} | {step_s:.4f} | {samples} | {mhz:.0f} | {clock_text} | "
              f"{watts:.0f} | {power_text} | {after_s:.4f} | {100 * (step_s / after_s - 1):+.1f}% | {before_s:.4f} | "
              f"{100 * (step_s / before_s - 1):+.1f}% |")


if __name__ == "__main__":
    main()
