#!/usr/bin/env python3
"""Make a profile price its measured interference pairs: the pairs `twin calibrate` recorded in
provenance.interference_points become overlap.points (docs/PROFILES.md "Interference, pair by pair"), one per key
(collective, size, beside, waves), pairs of one key (two GEMMs of equal waves) as the mean of their slowdowns, each
clamped to >= 1 as the profile format asks. Every other entry is kept.

  python3 tools/interference_points.py PROFILE.json --out PRICED.json

No shipped profile does this: on the studies of 2026-11-30 the pairs predicted worse than the scalar pair
(docs/ACCURACY.md, "Interference measured pair by pair"); the tool is how those re-predictions were made."""
import argparse
import json
import sys


def points_of(pairs):
    merged, order = {}, []
    for p in pairs:
        key = (p["collective"], p["size_bytes"], p["beside"], p.get("gemm_waves"))
        if key not in merged:
            merged[key] = []
            order.append(key)
        merged[key].append(p)
    points = []
    for key in order:
        group = merged[key]
        point = {"collective": key[0], "size_bytes": key[1], "beside": key[2]}
        if key[2] == "gemm":
            point["gemm_waves"] = key[3]
        for field in ("compute_slowdown", "communication_slowdown"):
            point[field] = max(1.0, sum(p[field + "_raw"] for p in group) / len(group))
        points.append(point)
    return points


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("profile")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    profile = json.load(open(args.profile))
    pairs = profile.get("provenance", {}).get("interference_points")
    if not pairs:
        sys.exit(f"{args.profile}: no provenance.interference_points (measure them: twin calibrate --collectives)")
    profile["overlap"]["points"] = points_of(pairs)
    with open(args.out, "w") as out:
        json.dump(profile, out, indent=2, sort_keys=True)
        out.write("\n")
    print(f"{args.out}: {len(profile['overlap']['points'])} points from {len(pairs)} pairs")


if __name__ == "__main__":
    main()
