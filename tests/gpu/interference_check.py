#!/usr/bin/env python3
"""Checks the interference points `twin calibrate` measured into a profile (cost/interference.hpp) against references
measured another way, and prints the grid.

  python3 tests/gpu/interference_check.py PROFILE.json [--markdown]

References (each an assertion with its tolerance; exit 1 on any failure):
  - every collective kind calibrated x every size x every compute kernel was measured (5 x 3 x 7 pairs, or the
    quick grid's 5 x 2 x 4);
  - each collective's time alone (a CUPTI kernel span) is within 35% of the same profile's collective table at that
    size (nccl-tests' events around many iterations, the mean over ranks): two timings of one kernel;
  - each GEMM alone runs between 40% and 100% of the H200's dense BF16 peak (989 TFLOP/s) at 4096^3 and above, the
    residual add (3 x 128 MiB moved) between 40% and 100% of its HBM bandwidth (4.8 TB/s);
  - every raw ratio lies in [0.9, 8] (a kernel slowed by what runs beside it, never sped up by more than noise; 8:
    a bound on broken timing, not on physics: a 4 MiB all-reduce beside a memory-bound add ran 4.6x);
  - the host's time to issue one grouped GEMM call (gpus[].grouped_gemm_issue_ns), where present, lies between 1 and
    100 us (a cuBLASLt call's host work; 10-11 us measured apart by GroupedMatmul.HostIssueTimePerCallAfterAWaitPrinted);
  - the grid's all-reduce of 256 MiB beside 8192^3 GEMMs agrees with the profile's scalar pair, measured separately
    by the same method, within 10%.
"""
import argparse
import json
import math
import re
import sys

PEAK_BF16_FLOPS = 989e12
HBM_BYTES_PER_S = 4.8e12
ADD_BYTES = 3 * (64 << 20) * 2
KINDS = ["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send"]


def gemm_dims(key):
    """m, n, k of a kernel_shape_key such as gemm:m=512,n=2048,k=4096,count=1,ta=0,tb=0."""
    return tuple(int(re.search(rf"\b{d}=(\d+)", key).group(1)) for d in "mnk")


def table_time_us(profile, kind, size, ranks):
    for t in profile["collectives"]["tables"]:
        if (t["collective"] == kind and t["group_size"] == ranks and t["nodes"] == 1 and t.get("blocks_per_peer", 1) == 1):
            rows = t["rows"]
            for (s0, t0, *_), (s1, t1, *_) in zip(rows, rows[1:]):
                if s0 <= size <= s1:
                    w = (math.log(size) - math.log(s0)) / (math.log(s1) - math.log(s0))
                    return math.exp(math.log(t0) + w * (math.log(t1) - math.log(t0)))
    return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("profile")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    profile = json.load(open(args.profile))
    pairs = profile["provenance"].get("interference_points", [])
    points = profile["overlap"].get("points", [])
    ranks = profile["provenance"].get("gpu_count", 2)
    failures = []

    def check(ok, what):
        if not ok:
            failures.append(what)

    sizes = sorted({p["size_bytes"] for p in pairs if p["collective"] == "all_reduce"})
    gemms = sorted({p["gemm"] for p in pairs if p["beside"] == "gemm"}, key=lambda g: (gemm_dims(g)[0] * gemm_dims(g)[1], g))
    distinct_waves = len({round(p["gemm_waves"], 9) for p in pairs if p["beside"] == "gemm"})
    # A pair that no rank could time overlapped in three attempts is left out (calibrate/gpu/interference.cpp).
    expected = len(KINDS) * len(sizes) * (len(gemms) + 1)
    if len(pairs) < expected:
        print(f"{expected - len(pairs)} of {expected} pairs left out (not timed overlapped in three attempts)")
    check(expected - 3 <= len(pairs) <= expected and len(sizes) >= 2,
          f"{len(pairs)} pairs: expected {len(KINDS)} kinds x {len(sizes)} sizes x {len(gemms) + 1}, at most 3 left out")
    check(len(points) <= len(KINDS) * len(sizes) * (distinct_waves + 1),
          f"{len(points)} points: expected at most one per kind, size and distinct waves ({distinct_waves}) or the add")
    for p in pairs:
        key = f"{p['collective']} {p['size_bytes'] >> 20} MiB beside {p.get('gemm', p['beside'])}"
        reference = table_time_us(profile, p["collective"], p["size_bytes"], ranks)
        if reference:
            ratio = p["communication_alone_ns"] / 1e3 / reference
            check(0.65 <= ratio <= 1.35, f"{key}: alone {p['communication_alone_ns'] / 1e3:.1f} us, table {reference:.1f} us")
        flops = 2 * math.prod(gemm_dims(p["gemm"])) if p["beside"] == "gemm" else 0
        if flops >= 2 * 4096**3:
            rate = flops / (p["compute_alone_ns"] * 1e-9)
            check(0.4 * PEAK_BF16_FLOPS <= rate <= PEAK_BF16_FLOPS, f"{key}: GEMM alone at {rate / 1e12:.0f} TFLOP/s")
        if p["beside"] == "memory_bound":
            rate = ADD_BYTES / (p["compute_alone_ns"] * 1e-9)
            check(0.4 * HBM_BYTES_PER_S <= rate <= HBM_BYTES_PER_S, f"{key}: add alone at {rate / 1e12:.2f} TB/s")
        for raw in ("compute_slowdown_raw", "communication_slowdown_raw"):
            check(0.9 <= p[raw] <= 8, f"{key}: {raw} {p[raw]:.3f}")
    for gpu in profile["gpus"]:
        if "grouped_gemm_issue_ns" in gpu:
            issue = gpu["grouped_gemm_issue_ns"]
            print(f"{gpu['gpu']}: the host issues a grouped GEMM's call in {issue / 1e3:.2f} us")
            check(1e3 <= issue <= 1e5, f"{gpu['gpu']}: grouped_gemm_issue_ns {issue:.0f}")
    scalar = profile["provenance"].get("interference", {})
    grid_pair = [p for p in pairs if p["collective"] == "all_reduce" and p["size_bytes"] == max(sizes)
                 and p.get("gemm", "").startswith("gemm:m=8192,n=8192,k=8192,")]
    if scalar and grid_pair and max(sizes) == 256 << 20:
        a, b = grid_pair[0]["compute_slowdown_raw"], scalar["compute_slowdown_raw"]
        check(abs(a / b - 1) <= 0.10, f"all_reduce 256 MiB beside 8192^3: grid {a:.3f}, scalar pair {b:.3f}")

    # The grid: compute slowdown / communication slowdown, a column per compute kernel (GEMM m x n x k, its waves).
    waves = {p["gemm"]: p["gemm_waves"] for p in pairs if p["beside"] == "gemm"}
    header = ["collective", "MiB"] + ["x".join(map(str, gemm_dims(g))) + f" ({waves[g]:.2f} w)" for g in gemms] + ["add 64 Mi"]
    print("| " + " | ".join(header) + " |")
    print("|" + " --- |" * len(header))
    for kind in KINDS:
        for size in sizes:
            row = [kind, str(size >> 20)]
            for g in gemms + [None]:
                match = [p for p in pairs if p["collective"] == kind and abs(p["size_bytes"] - size) <= size // 16
                         and (p.get("gemm") == g if g else p["beside"] == "memory_bound")]
                row.append(f"{match[0]['compute_slowdown_raw']:.2f} / {match[0]['communication_slowdown_raw']:.2f}"
                           if match else "-")
            print("| " + " | ".join(row) + " |")
    busy = [min(p["communication_busy_share"], p["compute_busy_share"]) for p in pairs]
    print(f"\nleast busy stream in its window: median {sorted(busy)[len(busy) // 2]:.2f}, lowest {min(busy):.2f}")
    for f in failures:
        print("FAIL:", f)
    print(f"interference check: {len(pairs)} pairs, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
