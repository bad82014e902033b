#!/usr/bin/env python3
"""Keeps of a `twin calibrate --scenario S --profile BEFORE` increment only the measured entries of the kinds named:
AFTER's `measured` entries that BEFORE lacks and whose shape key contains one of --kinds (e.g. "inputs=fp8", "fp8_cast");
every other new entry is dropped and named in provenance.increments_kept (a list: one record per increment kept). Why: a profile whose kernels came from
another calibration with folded runs (in-training times) would otherwise mix those with micro-benchmark times of
the same kinds (docs/PROFILES.md, `h200-x2`).
Usage: python3 tools/keep_profile_increment.py BEFORE AFTER --kinds K [K...] --why TEXT --out OUT"""
import argparse
import json

parser = argparse.ArgumentParser()
parser.add_argument("before")
parser.add_argument("after")
parser.add_argument("--kinds", nargs="+", required=True)
parser.add_argument("--why", required=True)
parser.add_argument("--out", required=True)
args = parser.parse_args()

before, after = json.load(open(args.before)), json.load(open(args.after))
kept, dropped = [], []
for gpu_before, gpu_after in zip(before["gpus"], after["gpus"]):
    if gpu_before["gpu"] != gpu_after["gpu"]:
        raise SystemExit(f"{args.after}: GPU {gpu_after['gpu']} where {args.before} has {gpu_before['gpu']}")
    for key in list(gpu_after["measured"]):
        if key in gpu_before["measured"]:
            continue
        if any(kind in key for kind in args.kinds):
            kept.append(key)
        else:
            dropped.append(key)
            del gpu_after["measured"][key]
# One record per increment kept, in order (a single record before 2026-11-30 17:15 UTC, kept as the first).
earlier = before["provenance"].get("increments_kept", [])
earlier = earlier if isinstance(earlier, list) else [earlier]
after["provenance"]["increments_kept"] = earlier + [{"kinds": args.kinds, "kept": len(kept), "dropped": sorted(dropped),
                                                     "why": args.why}]
raw = open(args.before).read()
with open(args.out, "w") as out:
    out.write(json.dumps(after, indent=2 if raw.startswith('{\n  "') else 1) + ("\n" if raw.endswith("\n") else ""))
print(f"kept {len(kept)} new entries, dropped {len(dropped)}")
