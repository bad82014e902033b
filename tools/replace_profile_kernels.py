#!/usr/bin/env python3
"""Give a multi-GPU profile the kernel measurements (its "gpus" entry) of a newer one-GPU profile of the
same GPU, keeping its own collectives, interference and memory, and say so in provenance.kernels_replaced.
For when the kernels were re-measured on one GPU and no machine of several GPUs could be had.

  python3 tools/replace_profile_kernels.py --kernels cost/profiles/h200-x1.json \
      --into cost/profiles/h200-x4.json --why "..."
"""
import argparse
import json
import sys

from profile_file import write_profile


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernels", required=True, help="profile whose gpus entry is taken")
    parser.add_argument("--into", required=True, help="profile to update in place (atomically)")
    parser.add_argument("--why", required=True, help="the reason, recorded in provenance.kernels_replaced")
    args = parser.parse_args()
    with open(args.kernels) as f:
        source = json.load(f)
    with open(args.into) as f:
        target = json.load(f)
    source_gpus = [g["gpu"] for g in source["gpus"]]
    target_gpus = [g["gpu"] for g in target["gpus"]]
    if source_gpus != target_gpus:
        sys.exit(f"{args.kernels} measures {source_gpus}, {args.into} {target_gpus}: not the same GPU")
    target["gpus"] = source["gpus"]
    provenance = source["provenance"]
    target["provenance"]["kernels_replaced"] = {
        "from": args.kernels,
        "command": provenance["command"],
        "date_utc": provenance["date_utc"],
        "gemm_best_tflops": provenance["gemm_best_tflops"],
        "gemm_shapes_measured": provenance["gemm_shapes_measured"],
        "gemm_reference_sm_clock_MHz": provenance.get("gemm_reference_sm_clock_MHz", 0),
        "why": args.why,
    }
    target["provenance"]["kernels"] = provenance["kernels"]
    # What the kernels are, as folding a run into the profile compares them (traces/recalibration_run.cpp).
    for key in ("attention", "kernel_revisions"):
        if key in provenance:
            target["provenance"][key] = provenance[key]
        else:
            target["provenance"].pop(key, None)
    write_profile(target, args.into)
    print(f"{args.into}: kernels of {args.kernels} ({provenance['date_utc']})")


if __name__ == "__main__":
    main()
