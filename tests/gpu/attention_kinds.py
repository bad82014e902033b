#!/usr/bin/env python3
"""Attention's kernel time per kind in a study's runs against a profile's price (issue 37), no GPU needed: each run's
pinned scenario simulated with PROFILE (`twin simulate --top 1`, its Chrome trace), rank 0's attention ops matched by
name with the run's measured ops.csv, summed over the runs. Prints measured / predicted per kind.
Usage: attention_kinds.py TWIN PROFILE STUDY_WORK   (STUDY_WORK: an accuracy study's folder with runs/*/ops.csv)
"""
import csv, glob, json, os, subprocess, sys, tempfile


def attention_totals(twin, profile, work):
    """{kind: [measured ns, predicted ns]} of rank 0's attention ops over the study's runs."""
    totals = {}
    scratch = tempfile.mkdtemp(prefix="attention-kinds-")
    for run in sorted(glob.glob(os.path.join(work, "runs", "*", ""))):
        if not os.path.exists(os.path.join(run, "ops.csv")):
            continue
        out = os.path.join(scratch, os.path.basename(run.rstrip("/")))
        subprocess.run([twin, "simulate", os.path.join(run, "scenario.json"), "--profile", profile, "--out", out,
                        "--quiet", "--top", "1"], check=True, stdout=subprocess.DEVNULL)
        events = json.load(open(glob.glob(os.path.join(out, "traces", "*.json"))[0]))
        events = events["traceEvents"] if isinstance(events, dict) else events
        predicted = {}
        for e in events:
            if e.get("ph") == "X" and e.get("pid") == 0:
                predicted[e["name"]] = predicted.get(e["name"], 0) + e["dur"] * 1e3
        for row in csv.DictReader(open(os.path.join(run, "ops.csv"))):
            if row["rank"] == "0" and row["kind"].startswith("attention") and row["name"] in predicted:
                t = totals.setdefault(row["kind"], [0.0, 0.0])
                t[0] += float(row["measured_median_ns"])
                t[1] += predicted[row["name"]]
    return totals


def main():
    twin, profile, work = sys.argv[1:4]
    for kind, (measured, priced) in sorted(attention_totals(twin, profile, work).items()):
        print(f"{kind}: measured {measured / 1e6:.1f} ms, predicted {priced / 1e6:.1f} ms, measured/predicted {measured / priced:.3f}")


if __name__ == "__main__":
    main()
