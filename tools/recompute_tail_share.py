#!/usr/bin/env python3
"""How much of each fully recomputed published row's predicted step is the tail of its layers' recomputed forward:
the ops after the last tensor the backward needs (fc2 and the MLP's residual add), which PyTorch's non-reentrant
checkpoint does not run again since PyTorch 2.1 (early stop; measured by tests/gpu/recompute_cost_pytorch.py,
docs/VALIDATION.md "PyTorch's checkpoint stops early"). twin prices a layer's whole forward again.

For each row of TABLE in the given groups whose search holds full recompute: `twin simulate --top 1` of its scenario,
then from rank 0's trace the step (the last op's end) and the compute-stream time of recomputed fc2 and mlp_residual
ops. Prints the share and the row's error with that time taken off the step at the same in-training factor (an
estimate: it assumes the tail lies on the critical path, as in these single-stage FSDP rows), given the table's
validation.csv (twin validate's) for the published and predicted times.
Usage: python3 tools/recompute_tail_share.py TWIN TABLE VALIDATION_CSV GROUP [GROUP ...]"""
import csv, glob, json, subprocess, sys, tempfile, pathlib


def tail_share(twin, scenario):
    with tempfile.TemporaryDirectory() as out:
        path = pathlib.Path(out) / "scenario.json"
        path.write_text(json.dumps(scenario))
        subprocess.run([twin, "simulate", str(path), "--out", out, "--top", "1", "--quiet"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        events = json.load(open(glob.glob(out + "/traces/*.json")[0]))["traceEvents"]
    ops = [e for e in events if e.get("ph") == "X" and e["pid"] == 0]
    step = max(e["ts"] + e["dur"] for e in ops)
    tail = sum(e["dur"] for e in ops if e["tid"] == 0 and "recompute" in e["name"]
               and e["args"].get("role") in ("fc2", "mlp_residual"))
    return tail / step


def main():
    twin, table, validation_csv, groups = sys.argv[1], sys.argv[2], sys.argv[3], set(sys.argv[4:])
    predicted = {r["id"]: r for r in csv.DictReader(open(validation_csv))}
    for row in json.load(open(table))["rows"]:
        if row["group"] not in groups or "full" not in row["scenario"]["search"].get("recompute", []):
            continue
        share = tail_share(twin, row["scenario"])
        v = predicted.get(row["id"])
        if not v or not v["predicted_iteration_s"]:
            print(f"{row['id']:48s} tail {100 * share:4.1f}% of the step (no prediction in {validation_csv})")
            continue
        published, step = float(v["published_iteration_s"]), float(v["predicted_iteration_s"])
        print(f"{row['id']:48s} tail {100 * share:4.1f}% of the step; error {100 * (step / published - 1):+6.1f}% "
              f"-> {100 * (step * (1 - share) / published - 1):+6.1f}% without it")


if __name__ == "__main__":
    main()
