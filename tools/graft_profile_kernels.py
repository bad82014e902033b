#!/usr/bin/env python3
"""Build a multi-GPU profile candidate from measurements of a clock-probed calibration of the same GPU kind (issue 37):
nothing fitted, every time moved between reference clocks by the project's own clock law (cost/sm_clock.hpp, read by
tools/clock_law.py: time ~ clock^-e, GEMMs e = 1, attention its fitted exponents, a soft-capped loss 1, every other
kernel 0).

--part attention: the target keeps everything but its micro-benchmarked attention (entries without a `source`, and the
  fitted attention curves): those become the source's, moved from the source's reference clock to the target's, and
  the target says `attention_at_reference_clock`; the source's sustained-clock curve comes with them (the training
  clock pricing moves attention and GEMMs to, where no traced shape is in `measured`: a folded profile's traces keep
  the curve off, and attention is priced at the reference clock, as its GEMMs). Entries a traced run measured
  (`source`) are kept: they are in-training times, priced as measured. Shipped for h200-x2 and h200-x4 (2026-11-30).
--part kernels: the target's whole per-GPU section becomes the source's (kernels, reference clock, curve, attention at
  its reference clock); the target keeps its collectives, interference and memory (outside the section), its rank
  drift, and the entries of its own increments (the kinds of provenance.increments_kept's records) that the source lacks, moved from
  the target's reference clock to the source's. The target's folded traces are dropped: they were in-situ ratios
  against the old kernels' prices. Tried for h200-x2 and h200-x4 on 2026-11-30, not shipped (docs/ACCURACY.md,
  "Clock-probed kernels for `h200-x2` and `h200-x4`").

--part revised: the target's micro-benchmarked entries (no `source`) of every kind whose kernel the source timed at
  another revision than the target (provenance.kernel_revisions; a kind a profile records none of ran revision 1,
  core/kernel_revisions.hpp) become the source's, and the target's record of those kinds the source's: the target
  priced a kernel `twin execute` no longer runs. Memory-bound kinds only (they do not follow the SM clock, so no
  clock law moves them); a revised compute-bound kind is refused. Entries a traced run measured are dropped with them
  (they timed the old kernel). Shipped for h200-x2 and h200-x4 (2026-11-30: moe_permute and moe_unpermute, revision
  1 -> 2; docs/ACCURACY.md "The MoE permutes of h200-x2 and h200-x4").

--part layernorm: the source's LayerNorm (`ln=1`) entries, twin calibrate's grid since 2026-11-30, that the target
  lacks, as timed (memory-bound kinds follow no SM clock). Shipped for h200-x2 and h200-x4 (2026-11-30).

--part capped: the source's soft-capped loss (`softcap=1`) entries, which follow the SM clock since 2026-12-01
  (cost/sm_clock.hpp), moved from the source's reference clock to the target's by that law, in place of the target's
  micro-benchmarked ones (before 2026-12-01 grafted as timed, at no stated clock); both profiles' timings of such
  kernels at their reference clocks (attention_at_reference_clock). Shipped for h200-x2 and h200-x4 (2026-11-30 as
  timed; 2026-12-01 by the law: docs/ACCURACY.md "The soft-capped loss follows the SM clock").

  python3 tools/graft_profile_kernels.py --part attention --source cost/profiles/h200-x1.json \
      --into cost/profiles/h200-x2.json --out /tmp/x2-attention.json --why "..."
"""
import argparse
import copy
import json
import sys

import clock_law
from profile_file import write_profile

EXPONENTS = clock_law.exponents()
ATTENTION_KINDS = ("attention_forward", "attention_backward")


def kind_of(key):
    return key.split(":", 1)[0]


def moved(entry, from_MHz, to_MHz, exponent):
    """The measurement at from_MHz as it would run at to_MHz (time_at_sm_clock_ns: t * (from / to)^e)."""
    out = dict(entry)
    factor = (from_MHz / to_MHz) ** exponent
    for field in ("median_ns", "p10_ns", "p90_ns"):
        if field in out:
            out[field] = entry[field] * factor
    return out


def only_gpu(profile, path):
    if len(profile["gpus"]) != 1:
        sys.exit(f"{path}: one GPU kind expected, found {len(profile['gpus'])}")
    return profile["gpus"][0]


def replace_by_clock_law(src, dst, selected):
    """dst's micro-benchmarked entries whose key `selected` picks, replaced by src's, moved from src's reference clock to
    dst's by their clock law; entries a traced run measured (`source`) stay on either side. (replaced, added)."""
    src_MHz, dst_MHz = src["reference_sm_clock_MHz"], dst["reference_sm_clock_MHz"]
    measured = {k: v for k, v in dst["measured"].items() if not selected(k) or v.get("source")}
    replaced = len(dst["measured"]) - len(measured)
    added = 0
    for key, entry in src["measured"].items():
        if selected(key) and not entry.get("source") and key not in measured:
            measured[key] = moved(entry, src_MHz, dst_MHz, clock_law.exponent_of_key(key, EXPONENTS))
            added += 1
    dst["measured"] = measured
    return replaced, added


def graft_attention(source, target):
    src, dst = source["gpus"][0], target["gpus"][0]
    if not src.get("attention_at_reference_clock"):
        sys.exit("the source's attention was not timed at its reference clock (attention_at_reference_clock)")
    src_MHz, dst_MHz = src["reference_sm_clock_MHz"], dst["reference_sm_clock_MHz"]
    replaced, added = replace_by_clock_law(src, dst, lambda key: kind_of(key) in ATTENTION_KINDS)
    for kind in ATTENTION_KINDS:  # the curve's peak fraction: time ~ 1 / peak
        curve = dict(src[kind])
        curve["peak"] = curve["peak"] * (dst_MHz / src_MHz) ** EXPONENTS[kind]
        dst[kind] = curve
    dst["attention_at_reference_clock"] = True
    dst["sustained_clock"] = src["sustained_clock"]
    return f"{replaced} attention entries replaced by {added} of the source's, moved {src_MHz:.0f} -> {dst_MHz:.0f} MHz"


def graft_kernels(source, target):
    src, dst = source["gpus"][0], target["gpus"][0]
    src_MHz, dst_MHz = src["reference_sm_clock_MHz"], dst["reference_sm_clock_MHz"]
    section = copy.deepcopy(src)
    if "rank_drift" in dst:
        section["rank_drift"] = dst["rank_drift"]
    kept = target["provenance"].get("increments_kept", [])
    kinds = [kind for record in (kept if isinstance(kept, list) else [kept]) for kind in record.get("kinds", [])]
    added = 0
    for key, entry in dst["measured"].items():
        if entry.get("source") or key in section["measured"]:
            continue
        if not any(k in key for k in kinds):
            continue
        section["measured"][key] = moved(entry, dst_MHz, src_MHz, EXPONENTS.get(kind_of(key), 0.0))
        added += 1
    target["gpus"] = [section]
    provenance = source["provenance"]
    for key in ("kernels", "attention", "kernel_revisions", "gemm_reference_sm_clock_MHz", "sustained_clock_replaced"):
        if key in provenance:
            target["provenance"][key] = provenance[key]
    target["provenance"]["kernels_replaced"] = {
        key: provenance[key] for key in ("command", "date_utc", "gemm_best_tflops", "gemm_shapes_measured")}
    target["provenance"]["kernels_replaced"]["from"] = "the per-GPU section below (provenance.grafted)"
    return (f"the source's per-GPU section, the target's rank drift and {added} entries of its increments "
            f"({', '.join(kinds) or 'none'}) moved {dst_MHz:.0f} -> {src_MHz:.0f} MHz")


def revision(provenance, kind):
    return provenance.get("kernel_revisions", {}).get(kind, 1)


def graft_revised(source, target):
    src, dst = source["gpus"][0], target["gpus"][0]
    kinds = sorted({kind_of(k) for k in list(src["measured"]) + list(dst["measured"])
                    if revision(source["provenance"], kind_of(k)) != revision(target["provenance"], kind_of(k))})
    clocked = [k for k in kinds if k in EXPONENTS]
    if clocked:
        sys.exit(f"revised kinds that follow the SM clock ({', '.join(clocked)}): graft them with their clock law")
    measured = {k: v for k, v in dst["measured"].items() if kind_of(k) not in kinds}
    replaced = len(dst["measured"]) - len(measured)
    added = 0
    for key, entry in src["measured"].items():
        if kind_of(key) in kinds and not entry.get("source"):
            measured[key] = dict(entry)
            added += 1
    dst["measured"] = measured
    revisions = target["provenance"].setdefault("kernel_revisions", {})
    for kind in kinds:
        revisions[kind] = revision(source["provenance"], kind)
    return f"{replaced} entries of {', '.join(kinds) or 'no kind'} replaced by {added} of the source's revisions"


def graft_added(source, target, kinds):
    """The source's micro-benchmarked entries whose key contains one of `kinds` and that the target lacks, as timed:
    memory-bound kinds only (no clock law moves them); a kind that follows the SM clock is refused."""
    src, dst = source["gpus"][0], target["gpus"][0]
    added = [k for k, v in src["measured"].items()
             if any(kind in k for kind in kinds) and k not in dst["measured"] and not v.get("source")]
    clocked = sorted({kind_of(k) for k in added if clock_law.exponent_of_key(k, EXPONENTS) > 0})
    if clocked:
        sys.exit(f"entries of kinds that follow the SM clock ({', '.join(clocked)}): graft them with their clock law")
    for key in added:
        dst["measured"][key] = dict(src["measured"][key])
    return f"{len(added)} entries of {', '.join(kinds)} added"


def graft_capped(source, target):
    """The source's soft-capped losses in place of the target's micro-benchmarked ones, moved between the profiles'
    reference clocks by their clock law."""
    src, dst = source["gpus"][0], target["gpus"][0]
    for name, gpu in (("source", src), ("target", dst)):
        if not gpu.get("attention_at_reference_clock"):
            sys.exit(f"the {name}'s clock-probed kernels are not at its reference clock (attention_at_reference_clock)")
    replaced, added = replace_by_clock_law(src, dst, clock_law.is_softcapped_loss)
    return f"{replaced} soft-capped loss entries replaced by {added} of the source's, moved by their clock law"


def graft_layernorm(source, target):
    """The source's LayerNorm entries the target lacks."""
    return graft_added(source, target, ["ln=1"])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", required=True, choices=["attention", "kernels", "revised", "capped", "layernorm"])
    parser.add_argument("--source", required=True, help="clock-probed profile of the same GPU kind")
    parser.add_argument("--into", required=True, help="the multi-GPU profile the candidate starts from")
    parser.add_argument("--out", required=True, help="the candidate (written atomically; may be --into)")
    parser.add_argument("--why", required=True, help="recorded in provenance.grafted")
    args = parser.parse_args()
    with open(args.source) as f:
        source = json.load(f)
    with open(args.into) as f:
        target = json.load(f)
    if only_gpu(source, args.source)["gpu"] != only_gpu(target, args.into)["gpu"]:
        sys.exit(f"{args.source} and {args.into} measure different GPUs")
    graft = {"attention": graft_attention, "kernels": graft_kernels, "revised": graft_revised,
             "capped": graft_capped, "layernorm": graft_layernorm}[args.part]
    what = graft(source, target)
    record = {
        "part": args.part, "from": args.source, "from_command": source["provenance"]["command"],
        "from_date_utc": source["provenance"]["date_utc"], "what": what, "why": args.why,
        "command": "python3 tools/graft_profile_kernels.py --part {} --source {} --into {}".format(
            args.part, args.source, args.into),
    }
    earlier = target["provenance"].get("grafted")  # one record per graft, in order
    earlier = [] if earlier is None else earlier if isinstance(earlier, list) else [earlier]
    target["provenance"]["grafted"] = [g for g in earlier if g.get("part") != args.part] + [record]
    write_profile(target, args.out)
    print(f"{args.out}: {what}")


if __name__ == "__main__":
    main()
