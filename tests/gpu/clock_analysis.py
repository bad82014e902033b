#!/usr/bin/env python3
"""The clock of a training step as a mechanism (issue 37), checked on an accuracy study's runs (no GPU).

Each run of `tests/gpu/accuracy_study.py` records the median SM clock its GPUs held while busy
(execution.json, `sm_clock_MHz_median`, nvidia-smi every 100 ms). This script predicts every run again with
  calibration  the profile's micro-benchmarks alone (trace entries put back to their benchmarks, as the built-in
               profile takes the shipped ones: nothing learnt from any training run),
  + clock      the same with `sustained_sm_clock_MHz` set to the median clock of the *other* half's runs
               (halves as the study splits them: accuracy_stats.split_halves), so that no run is predicted with
               a clock measured on itself,
  + curve      (--curve) the same with the sustained-clock curve `twin calibrate` measured (a profile's
               `sustained_clock`, or a file holding one): each rank class's GEMMs priced at the clock the curve
               gives for its step's GEMM duty (sim/step_clock.hpp); no clock from any training run,
and reports error = measured / predicted - 1 per run and per variant, with Kendall's tau-b.
Usage: clock_analysis.py --twin build/twin --work out/acc --profile cost/profiles/h100-x1.json --out DIR
         [--clock-from OTHER_WORK] [--curve docs/accuracy/2026-11-28-sustained-clock-h200x4.json]
"""
import argparse, csv, json, os, subprocess, sys

from accuracy_stats import kendall_tau_b, split_halves


def load(path):
    with open(path) as f:
        return json.load(f)


def benchmarks_only(profile):
    """The profile with every trace entry replaced by the benchmark it replaced (or dropped where it replaced
    none), as cost/builtin_profile.cpp keep_benchmarks_only does."""
    for gpu in profile["gpus"]:
        kept = {}
        for key, m in gpu["measured"].items():
            if "source" not in m:
                kept[key] = m
            elif m.get("benchmark_ns", 0) > 0:
                b = m["benchmark_ns"]
                kept[key] = {"median_ns": b, "p10_ns": b, "p90_ns": b, "samples": 1}
        gpu["measured"] = kept
        gpu.pop("corrections", None)
        gpu.pop("sustained_clock", None)  # no clock of any kind: the curve is a variant of its own (--curve)
    return profile


def with_clock(profile, clock_MHz):
    for gpu in profile["gpus"]:
        gpu["sustained_sm_clock_MHz"] = clock_MHz
    return profile


def with_curve(profile, curve):
    for gpu in profile["gpus"]:
        gpu["sustained_clock"] = curve
    return profile


def read_curve(path):
    """The sustained-clock curve in `path`: a file holding one ({"points": ...}, or under "sustained_clock"), or a
    profile whose first GPU holds one."""
    document = load(path)
    if "gpus" in document:
        document = document["gpus"][0]
    curve = document.get("sustained_clock", document)
    if "points" not in curve:
        sys.exit(f"{path}: no sustained-clock curve")
    return curve


def on_gpu(scenario_path, gpu, out):
    """The pinned scenario with its nodes' GPU named `gpu` (the device may lend another card than the study
    planned for: the plan runs the same, the GPU prices it); its path under `out`."""
    scenario = load(scenario_path)
    for node in scenario["cluster"]["nodes"]:
        node["gpu"] = gpu
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "scenario.json")
    with open(path, "w") as f:
        json.dump(scenario, f)
    return path


def predict(twin, scenario, profile_path, out):
    """The pinned scenario's iteration time (s) under the profile."""
    subprocess.run([twin, "simulate", scenario, "--profile", profile_path, "--out", out, "--quiet", "--top", "0"],
                   check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "ranking.csv")) as f:
        return float(next(csv.DictReader(f))["iteration_time_s"])


def median(values):
    values = sorted(values)
    return values[len(values) // 2] if len(values) % 2 else (values[len(values) // 2 - 1] + values[len(values) // 2]) / 2


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--twin", required=True)
    parser.add_argument("--work", required=True, help="an accuracy study's work folder (runs/*/execution.json)")
    parser.add_argument("--profile", required=True, help="the profile file the study's shapes are priced from")
    parser.add_argument("--out", required=True)
    parser.add_argument("--gpu", help="the GPU the runs ran on, as scenarios name it (default: the scenario's)")
    parser.add_argument("--clock-from", metavar="WORK",
                        help="another study's work folder (another model on the same machine): every run is also "
                             "predicted with the median clock of that study's runs (column 'other model')")
    parser.add_argument("--curve", metavar="FILE",
                        help="a sustained-clock curve (a profile or the raw measurement): every run is also predicted "
                             "with it (column 'calibrated curve')")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    study = load(os.path.join(args.work, "study.json"))
    runs = []
    for s in study["strategies"]:
        folder = os.path.join(args.work, "runs", s["name"])
        try:
            execution, metrics = load(os.path.join(folder, "execution.json")), load(os.path.join(folder, "metrics.json"))
        except OSError:
            continue
        if execution.get("rc") != 0 or not execution.get("sm_clock_MHz_median"):
            continue
        runs.append(dict(s, folder=folder, measured_s=metrics["measured"]["iteration_s"],
                         clock_MHz=execution["sm_clock_MHz_median"], power_W=execution["power_W_median"]))
    other_model_clock = None
    if args.clock_from:
        other = [load(os.path.join(args.clock_from, "runs", name, "execution.json"))
                 for name in sorted(os.listdir(os.path.join(args.clock_from, "runs")))
                 if os.path.exists(os.path.join(args.clock_from, "runs", name, "execution.json"))]
        other_model_clock = median([e["sm_clock_MHz_median"] for e in other if e.get("rc") == 0 and e.get("sm_clock_MHz_median")])
    if len(runs) < 4:
        sys.exit(f"{len(runs)} runs with a recorded clock: too few to split")
    half_a, half_b = split_halves(runs)
    base = benchmarks_only(load(args.profile))
    base_path = os.path.join(args.out, "calibration.json")
    with open(base_path, "w") as f:
        json.dump(base, f)
    clock_of = {"A": median([r["clock_MHz"] for r in half_a]), "B": median([r["clock_MHz"] for r in half_b])}
    rows = []
    for half, other, members in (("A", "B", half_a), ("B", "A", half_b)):
        clocked_path = os.path.join(args.out, f"calibration+clock-of-{other}.json")
        with open(clocked_path, "w") as f:
            json.dump(with_clock(load(base_path), clock_of[other]), f)
        for r in members:
            scenario = os.path.join(r["folder"], "scenario.json")
            if args.gpu:
                scenario = on_gpu(scenario, args.gpu, os.path.join(args.out, "sim", r["name"]))
            plain = predict(args.twin, scenario, base_path, os.path.join(args.out, "sim", r["name"], "calibration"))
            clocked = predict(args.twin, scenario, clocked_path, os.path.join(args.out, "sim", r["name"], "clock"))
            row = dict(name=r["name"], half=half, measured_s=r["measured_s"], clock_MHz=r["clock_MHz"],
                       power_W=r["power_W"], calibration_s=plain, clocked_s=clocked, clock_used_MHz=clock_of[other],
                       calibration_error=r["measured_s"] / plain - 1, clocked_error=r["measured_s"] / clocked - 1)
            if other_model_clock:
                other_path = os.path.join(args.out, "calibration+clock-of-other-model.json")
                if not os.path.exists(other_path):
                    with open(other_path, "w") as f:
                        json.dump(with_clock(load(base_path), other_model_clock), f)
                row["other_model_s"] = predict(args.twin, scenario, other_path,
                                               os.path.join(args.out, "sim", r["name"], "other-model"))
                row["other_model_error"] = r["measured_s"] / row["other_model_s"] - 1
            if args.curve:
                curve_path = os.path.join(args.out, "calibration+curve.json")
                if not os.path.exists(curve_path):
                    with open(curve_path, "w") as f:
                        json.dump(with_curve(load(base_path), read_curve(args.curve)), f)
                row["curve_s"] = predict(args.twin, scenario, curve_path, os.path.join(args.out, "sim", r["name"], "curve"))
                row["curve_error"] = r["measured_s"] / row["curve_s"] - 1
            rows.append(row)
    reference = base["gpus"][0].get("reference_sm_clock_MHz")
    summary = {"reference_sm_clock_MHz": reference, "half_clock_MHz": clock_of, "other_model_clock_MHz": other_model_clock,
               "runs": rows}
    variants = ("calibration", "clocked") + (("other_model",) if other_model_clock else ()) + (("curve",) if args.curve else ())
    for variant in variants:
        errors = [abs(r[f"{variant}_error"]) for r in rows]
        summary[variant] = {"mean_abs_error": sum(errors) / len(errors), "max_abs_error": max(errors),
                            "mean_error": sum(r[f"{variant}_error"] for r in rows) / len(rows),
                            "tau_b": kendall_tau_b([r[f"{variant}_s"] for r in rows], [r["measured_s"] for r in rows])}
    with open(os.path.join(args.out, "clock_analysis.json"), "w") as f:
        json.dump(summary, f, indent=1, sort_keys=True)
    print(f"reference clock {reference} MHz; busy-median clocks: half A {clock_of['A']} MHz, half B {clock_of['B']} MHz"
          + (f", other model {other_model_clock} MHz" if other_model_clock else ""))
    print("| run | half | measured s | clock MHz | power W | calibration | + clock of the other half |"
          + (" + clock of the other model |" if other_model_clock else "") + (" calibrated clock curve |" if args.curve else ""))
    print("| --- | --- | --- | --- | --- | --- | --- |" + (" --- |" if other_model_clock else "")
          + (" --- |" if args.curve else ""))
    for r in rows:
        print(f"| {r['name']} | {r['half']} | {r['measured_s']:.4f} | {r['clock_MHz']:.0f} | {r['power_W']:.0f} | "
              f"{100 * r['calibration_error']:+.2f}% | {100 * r['clocked_error']:+.2f}% |"
              + (f" {100 * r['other_model_error']:+.2f}% |" if other_model_clock else "")
              + (f" {100 * r['curve_error']:+.2f}% |" if args.curve else ""))
    for variant in variants:
        v = summary[variant]
        print(f"{variant}: mean |error| {100 * v['mean_abs_error']:.2f}%, max {100 * v['max_abs_error']:.2f}%, "
              f"mean {100 * v['mean_error']:+.2f}%, tau-b {v['tau_b']:.3f}")


if __name__ == "__main__":
    main()
