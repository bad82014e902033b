#!/usr/bin/env python3
"""Moves a profile's attention timings from the clock law they were scaled with to twin's law now (cost/sm_clock.hpp,
read by tools/clock_law.py). A profile whose attention is at its reference clock (attention_at_reference_clock) stores
each micro-benchmarked attention timing as time_timed x (clock / reference)^e, with the clock it ran at beside it
(sm_clock_MHz); when the law's exponent e changes, the stored times must follow, or the simulator would price them
with one law after calibration scaled them with another. Traced entries (with a `source`) hold the training clock and
stay; the fitted attention curves stay (they price only shapes far from every measured one). provenance
.attention_clock_law keeps one record per rescaling: the exponents before and after, the entries moved, why.
Usage: python3 tools/rescale_attention_clock.py PROFILE --from F B --why TEXT --out OUT"""
import argparse
import datetime
import json
import sys

import clock_law
from graft_profile_kernels import ATTENTION_KINDS, kind_of, moved
from profile_file import write_profile


def rescale(profile, before, after=None):
    """Moves every GPU's micro-benchmarked attention entries from exponents `before` {kind: e} to `after` (default
    clock_law's); returns how many moved. Exits when a GPU's attention is not at its reference clock or an entry lacks
    its clock."""
    after = after or clock_law.exponents()
    count = 0
    for gpu in profile["gpus"]:
        reference = gpu.get("reference_sm_clock_MHz", 0)
        if not gpu.get("attention_at_reference_clock") or reference <= 0:
            sys.exit(f"GPU {gpu.get('gpu')}: attention not at a reference clock (attention_at_reference_clock)")
        for key, entry in gpu["measured"].items():
            kind = kind_of(key)
            if kind not in ATTENTION_KINDS or entry.get("source"):
                continue
            if entry.get("sm_clock_MHz", 0) <= 0:
                sys.exit(f"{key}: no sm_clock_MHz, the clock it ran at")
            gpu["measured"][key] = moved(entry, entry["sm_clock_MHz"], reference, after[kind] - before[kind])
            count += 1
    return count


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("profile")
    parser.add_argument("--from", dest="before", nargs=2, type=float, required=True, metavar=("F", "B"))
    parser.add_argument("--why", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    with open(args.profile) as f:
        profile = json.load(f)
    before = {"attention_forward": args.before[0], "attention_backward": args.before[1]}
    count = rescale(profile, before)
    after = clock_law.exponents()
    record = {"date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "from": before, "to": {kind: after[kind] for kind in ATTENTION_KINDS}, "entries": count, "why": args.why}
    profile["provenance"]["attention_clock_law"] = profile["provenance"].get("attention_clock_law", []) + [record]
    write_profile(profile, args.out)
    print(f"{count} attention entries moved to the law of cost/sm_clock.hpp; wrote {args.out}")


if __name__ == "__main__":
    main()
