#!/usr/bin/env python3
"""Two variants of a calibrated profile for judging attention's clock (issue 37), no GPU needed:
  at-reference.json  the profile as `twin calibrate` wrote it: attention timings at reference_sm_clock_MHz
                     (attention_at_reference_clock), priced at the training clock like the GEMMs;
  as-timed.json      the same timings put back to the clock each ran at (median x reference / its sm_clock_MHz),
                     attention_at_reference_clock dropped: attention priced as calibrations before 2026-11-29 did.
The fitted attention curves are left as they are in both: an unmeasured attention shape is interpolated among the
measured ones on the ratio to the curve, so the measured entries carry the difference.
--network-from Q takes Q's network sections (collectives, intra_node, inter_node, overlap) and each GPU's
rank_drift, so that a one-GPU calibration can price runs on the GPUs Q was measured on.
Usage: attention_clock_variants.py --profile P --out DIR [--network-from h200-x4.json]
"""
import argparse, copy, json, os, sys


def load(path):
    with open(path) as f:
        return json.load(f)


def as_timed(profile):
    out = copy.deepcopy(profile)
    for gpu in out["gpus"]:
        reference = gpu.get("reference_sm_clock_MHz", 0)
        if not gpu.pop("attention_at_reference_clock", False) or reference <= 0:
            continue
        for key, m in gpu["measured"].items():
            if key.startswith("attention_") and m.get("sm_clock_MHz", 0) > 0 and "source" not in m:
                for field in ("median_ns", "p10_ns", "p90_ns"):
                    m[field] = m[field] * reference / m["sm_clock_MHz"]
    return out


def with_network(profile, network):
    out = copy.deepcopy(profile)
    for section in ("collectives", "intra_node", "inter_node", "intra_node_pcie", "overlap"):
        if section in network:
            out[section] = network[section]
    drift = {g["gpu"]: g["rank_drift"] for g in network["gpus"] if "rank_drift" in g}
    for gpu in out["gpus"]:
        if gpu["gpu"] in drift:
            gpu["rank_drift"] = drift[gpu["gpu"]]
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--network-from")
    args = parser.parse_args()
    profile = load(args.profile)
    if not any(g.get("attention_at_reference_clock") for g in profile["gpus"]):
        sys.exit(f"{args.profile}: no GPU states attention_at_reference_clock (a calibration before 2026-11-29?)")
    if args.network_from:
        profile = with_network(profile, load(args.network_from))
    os.makedirs(args.out, exist_ok=True)
    for name, variant in (("at-reference", profile), ("as-timed", as_timed(profile))):
        with open(os.path.join(args.out, f"{name}.json"), "w") as f:
            json.dump(variant, f, indent=1, sort_keys=True)
        print(os.path.join(args.out, f"{name}.json"))


if __name__ == "__main__":
    main()
