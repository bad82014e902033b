#!/usr/bin/env python3
"""Two variants of a calibrated profile for judging attention's clock (issue 37), no GPU needed:
  at-reference.json  attention timings at reference_sm_clock_MHz by attention's clock law, time ~ clock^-e
                     (cost/sm_clock.hpp's, read by tools/clock_law.py; --exponents to try others; a twin built with
                     the same law must price it), attention_at_reference_clock set: priced at the training clock;
  as-timed.json      the same timings at the clock each ran at (its sm_clock_MHz), attention_at_reference_clock
                     dropped: attention priced as calibrations before 2026-11-29 did.
--stored-exponents F B: the law the profile's timings were scaled with (default the law now; calibrations of
2026-11-29 01:33 and 01:47 UTC, before the law was fitted: 1 1; from then until 2026-11-30 22:30 UTC: 0.43 0.60).
The fitted attention curves are left as they are in both: an unmeasured attention shape is interpolated among the
measured ones on the ratio to the curve, so the measured entries carry the difference.
--network-from Q takes Q's network sections (collectives, intra_node, inter_node, overlap) and each GPU's
rank_drift, so that a one-GPU calibration can price runs on the GPUs Q was measured on.
Usage: attention_clock_variants.py --profile P --out DIR [--network-from h200-x4.json]
"""
import argparse, copy, json, os, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tools"))
import clock_law  # noqa: E402
from rescale_attention_clock import rescale  # noqa: E402

LAW = clock_law.exponents()
LAW_NOW = [LAW["attention_forward"], LAW["attention_backward"]]


def load(path):
    with open(path) as f:
        return json.load(f)


def rescaled(profile, stored, wanted):
    """Attention timings scaled with exponents `stored` (forward, backward) moved to `wanted` (None: as timed, the
    flag dropped) by tools/rescale_attention_clock.py's rule: time_ref = time_timed x (clock / reference)^e."""
    out = copy.deepcopy(profile)
    before = {"attention_forward": stored[0], "attention_backward": stored[1]}
    after = {"attention_forward": 0.0, "attention_backward": 0.0} if wanted is None else \
        {"attention_forward": wanted[0], "attention_backward": wanted[1]}
    rescale(out, before, after)
    if wanted is None:
        for gpu in out["gpus"]:
            gpu.pop("attention_at_reference_clock")
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
    parser.add_argument("--stored-exponents", nargs=2, type=float, default=LAW_NOW, metavar=("F", "B"))
    parser.add_argument("--exponents", nargs=2, type=float, default=LAW_NOW, metavar=("F", "B"))
    args = parser.parse_args()
    profile = load(args.profile)
    if not any(g.get("attention_at_reference_clock") for g in profile["gpus"]):
        sys.exit(f"{args.profile}: no GPU states attention_at_reference_clock (a calibration before 2026-11-29?)")
    if args.network_from:
        profile = with_network(profile, load(args.network_from))
    os.makedirs(args.out, exist_ok=True)
    variants = (("at-reference", rescaled(profile, args.stored_exponents, args.exponents)),
                ("as-timed", rescaled(profile, args.stored_exponents, None)))
    for name, variant in variants:
        with open(os.path.join(args.out, f"{name}.json"), "w") as f:
            json.dump(variant, f, indent=1, sort_keys=True)
        print(os.path.join(args.out, f"{name}.json"))


if __name__ == "__main__":
    main()
