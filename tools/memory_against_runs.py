#!/usr/bin/env python3
"""Predicted peak memory of recorded `twin execute` runs against their measured peaks.

For every run folder under the given roots (a folder holding metrics.json and scenario.json, or metrics.json of a
shipped scenario named with --scenario), simulates the run's scenario again with TWIN and prints, per run, the
measured peak (the largest over ranks), the predicted device total and, where the binary writes it, the predicted
part the executor's peak counts (total less the CUDA context and NCCL's buffers: `outside_allocations`).

  python3 tools/memory_against_runs.py --twin build/twin DIR... [--scenario RUN_DIR=SCENARIO.json ...]

Runs of the same scenario (a study rerun) are predicted and listed once: the first found, roots in the order given.
"""
import argparse
import json
import pathlib
import subprocess
import sys
import tempfile

GiB = 1024.0 ** 3


def predicted(twin: str, scenario: pathlib.Path) -> tuple[float, float | None]:
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([twin, "simulate", str(scenario), "--quiet", "--top", "1", "--out", out], check=True,
                       stdout=subprocess.DEVNULL)
        stages = json.loads((pathlib.Path(out) / "best.json").read_text())["predicted"]["memory_bytes_per_stage"]
    total = max(s["total"] for s in stages) / GiB
    if "outside_allocations" not in stages[0]:
        return total, None
    return total, max(s["total"] - s["outside_allocations"] for s in stages) / GiB


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--twin", required=True)
    parser.add_argument("--scenario", action="append", default=[], help="RUN_DIR=SCENARIO.json for runs without one")
    parser.add_argument("roots", nargs="+")
    args = parser.parse_args()
    given = dict(item.split("=", 1) for item in args.scenario)
    seen = set()
    print("| run | measured GiB | predicted total GiB | predicted allocated GiB | allocated error |")
    print("|---|---|---|---|---|")
    for root in args.roots:
        for metrics_file in sorted(pathlib.Path(root).rglob("metrics.json")):
            run = metrics_file.parent
            scenario = pathlib.Path(given.get(str(run), run / "scenario.json"))
            if not scenario.exists():
                continue
            key = scenario.read_text()
            if key in seen:
                continue
            seen.add(key)
            measured = max(r["peak_memory_GiB"] for r in json.loads(metrics_file.read_text())["ranks"])
            total, allocated = predicted(args.twin, scenario)
            error = "" if allocated is None else f"{100 * (measured / allocated - 1):+.1f}%"
            allocated_text = "" if allocated is None else f"{allocated:.2f}"
            print(f"| {pathlib.Path(root).name}/{run.relative_to(root)} | {measured:.2f} | {total:.2f} | {allocated_text} | {error} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
