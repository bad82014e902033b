#!/usr/bin/env python3
"""The shipped MoE scenarios under each routing model and token dispatcher (docs/ACCURACY.md, "MoE routing").

    python3 tools/moe_routing_study.py build-cpu/twin OUT_DIR

For each scenario in scenarios/ with an MoE model, writes variants of it (model.moe.routing replaced, or the
all-gather dispatcher) beside the original, simulates each with `twin simulate --quiet`, and prints a Markdown table:
the best plan, its iteration time, the shipped best plan's time under the variant, and Kendall's tau of the variant's
ranking of the shipped top 10 against the shipped order.
"""
import csv
import json
import pathlib
import subprocess
import sys

VARIANTS = {
    "as shipped": None,
    "balanced": {"routing": {"distribution": "balanced"}},
    "forced": {"routing": {"distribution": "forced"}},
    "loss_free": {"routing": {"distribution": "loss_free"}},
    "aux_loss": {"routing": {"distribution": "aux_loss"}},
    "zipf 1.0": {"routing": {"distribution": "zipf", "exponent": 1.0}},
    "allgather": {"dispatcher": "allgather"},
}


def variant(scenario, change):
    s = json.loads(json.dumps(scenario))
    if change and "routing" in change:
        s["model"].setdefault("moe", {}).pop("routing_imbalance", None)
        s["model"]["moe"]["routing"] = change["routing"]
    if change and "dispatcher" in change:
        s.setdefault("framework", {})["moe_token_dispatcher_type"] = change["dispatcher"]
    return s


def ranking(folder):
    with open(folder / "ranking.csv") as f:
        rows = [r for r in csv.DictReader(f) if r["feasible"] == "true"]
    return {r["strategy"]: float(r["iteration_time_s"]) for r in rows}


def kendall_tau(order, times):
    pairs = [(a, b) for i, a in enumerate(order) for b in order[i + 1:] if a in times and b in times]
    if not pairs:
        return float("nan")
    concordant = sum(1 if times[a] < times[b] else -1 if times[a] > times[b] else 0 for a, b in pairs)
    return concordant / len(pairs)


def main():
    twin, out = pathlib.Path(sys.argv[1]).resolve(), pathlib.Path(sys.argv[2]).resolve()
    root = pathlib.Path(__file__).resolve().parent.parent
    print("| scenario | routing | best plan | its iteration | shipped best under it | tau of the shipped top 10 |")
    print("| --- | --- | --- | --- | --- | --- |")
    for path in sorted((root / "scenarios").glob("*.json")):
        scenario = json.loads(path.read_text())
        model = scenario.get("model", {})
        if "moe" not in model and "mixtral" not in str(model.get("preset", "")):
            continue
        shipped = None
        for name, change in VARIANTS.items():
            folder = out / f"{path.stem}.{name.replace(' ', '_')}"
            folder.mkdir(parents=True, exist_ok=True)
            scenario_file = path.parent / f".{path.stem}.{name.replace(' ', '_')}.json"
            scenario_file.write_text(json.dumps(variant(scenario, change)))
            try:
                subprocess.run([str(twin), "simulate", str(scenario_file), "--out", str(folder / "run"), "--quiet"],
                               check=True, cwd=path.parent, capture_output=True)
            finally:
                scenario_file.unlink()
            times = ranking(folder / "run")
            order = sorted(times, key=times.get)
            shipped = shipped or order
            print(f"| {path.stem} | {name} | `{order[0]}` | {times[order[0]]:.3f} s | "
                  f"{times.get(shipped[0], float('nan')):.3f} s | {kendall_tau(shipped[:10], times):.2f} |")


if __name__ == "__main__":
    main()
