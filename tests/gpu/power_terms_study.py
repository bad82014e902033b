#!/usr/bin/env python3
"""Which variable a GPU's power follows (issue 37 item 1, issue 40): the readings `twin calibrate --sustained-clock`
logged on one H200 on 2026-11-29 19:39 UTC (docs/accuracy/2026-11-29-power-loads-1xH200.tar.gz, calibrate-x1.log;
copied below), the dynamic power as energy per FLOP, as power per share of busy time in tensor-core kernels (active
SM-time, at the clock), or both, each with its clock exponent, fitted on the pure loads (BF16 GEMMs back to back and
beside idle SMs, FP8 GEMMs back to back: two FLOP rates per SM-cycle) and predicting the rest (the curves'
GEMM-and-adds points, the grouped expert GEMM, attention). With --steps, the same forms (and calibrate's per-FLOP
model) on training steps of tests/gpu/moe_clock_device.sh: each run's power at its measured clock from its own op
times (ops.csv) and the simulator's FLOPs and bytes (tests/gpu/power_clock_check.py), against nvidia-smi's median.
Offline: no model in the code reads it (docs/ACCURACY.md, "The power model on class-pure loads").
Usage: python3 tests/gpu/power_terms_study.py [--steps TWIN PROFILE RUN_DIR...]"""
import csv, os, sys

STATIC_W, MAX_MHZ, MEMORY = 123.1, 1968.5, (540.0, 4199)  # one-thread load; memory-only load: W at GB/s
W_PER_GBPS = (MEMORY[0] - STATIC_W) / MEMORY[1]
LOADS = {  # MHz, W, TFLOP/s of busy time, TFLOP/s of kernel time, GB/s
    "bf16 back to back": (1478, 679.9, 657.8, 674, 0), "bf16 idle 0.75": (1701, 678.4, 551.9, 776, 0),
    "bf16 idle 0.5": (1968, 524.3, 391.6, 801, 0), "fp8 back to back": (1432, 696.7, 1261.8, 1325, 0),
    "fp8 adds 0.813": (1507, 684.2, 1042.9, 1374, 764), "fp8 adds 0.623": (1612, 681.9, 853.8, 1459, 1564),
    "fp8 adds 0.392": (1847, 694.5, 584.6, 1549, 2569), "bf16 adds 0.809": (1552, 694.1, 550.3, 704, 807),
    "bf16 adds 0.621": (1625, 662.3, 439.6, 726, 1612), "bf16 adds 0.406": (1804, 700.8, 314.6, 794, 2542),
    "expert GEMM": (1964, 670.6, 323.7, 422, 0), "attention": (1761, 686.0, 374.1, 388, 0)}
FIT = ["bf16 back to back", "bf16 idle 0.75", "bf16 idle 0.5", "fp8 back to back"]
FORMS = {"per FLOP": (False, True), "per share of busy time": (True, False), "both": (True, True)}


def power_W(mhz, share, tflops, gbps, exponent, per_share_W, pj_per_flop):
    scale = (mhz / MAX_MHZ) ** exponent
    return STATIC_W + scale * (per_share_W * share * mhz / MAX_MHZ + pj_per_flop * tflops + W_PER_GBPS * gbps)


def least_squares(exponent, use_share, use_flop):
    """The form's two energies by least squares on the fit loads' power at `exponent`, and the squared error."""
    rows = []
    for name in FIT:
        mhz, watts, tflops, kernel_tflops, gbps = LOADS[name]
        scale = (mhz / MAX_MHZ) ** exponent
        rows.append((scale * tflops / kernel_tflops * mhz / MAX_MHZ if use_share else 0,
                     scale * tflops if use_flop else 0, watts - STATIC_W - scale * W_PER_GBPS * gbps))
    a11, a12, a22 = (sum(r[i] * r[j] for r in rows) for i, j in ((0, 0), (0, 1), (1, 1)))
    b1, b2 = sum(r[0] * r[2] for r in rows), sum(r[1] * r[2] for r in rows)
    if use_share and use_flop:
        det = a11 * a22 - a12 * a12
        share_W, pj = (b1 * a22 - b2 * a12) / det, (a11 * b2 - a12 * b1) / det
    else:
        share_W, pj = (b1 / a11, 0.0) if use_share else (0.0, b2 / a22)
    return share_W, pj, sum((r[0] * share_W + r[1] * pj - r[2]) ** 2 for r in rows)


def fitted(use_share, use_flop):
    exponent = min((least_squares(x / 100, use_share, use_flop)[2], x / 100) for x in range(0, 400))[1]
    share_W, pj, _ = least_squares(exponent, use_share, use_flop)
    return exponent, share_W, pj


def loads_table():
    for form, flags in FORMS.items():
        exponent, share_W, pj = fitted(*flags)
        print(f"{form}: exponent {exponent:.2f}, {share_W:.0f} W per busy share, {pj:.3f} pJ/FLOP")
        for name, (mhz, watts, tflops, kernel_tflops, gbps) in LOADS.items():
            p = power_W(mhz, tflops / kernel_tflops, tflops, gbps, exponent, share_W, pj)
            print(f"  {name:18s} {watts:6.1f} W measured, {p:6.1f} W ({100 * (p / watts - 1):+.1f}%)"
                  + (" fit" if name in FIT else ""))


def steps_table(twin, profile, runs):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import power_clock_check as check
    model = next(g["power_model"] for g in __import__("json").load(open(profile))["gpus"] if "power_model" in g)
    forms = {name: fitted(*flags) for name, flags in FORMS.items() if name != "per FLOP"}
    print("| run | measured clock, power | busy share, TFLOP/s, GB/s | calibrate's model | "
          + " | ".join(forms) + " |")
    for run in runs:
        _, clock = check.priced(twin, run, profile)
        _, mhz, watts, _ = check.measured(run)
        passes = [r for r in csv.DictReader(open(os.path.join(run, "ops.csv")))
                  if r["stream"] == "compute" and r["phase"] != "optimizer"]
        busy_s = sum(float(r["measured_median_ns"] or 0) for r in passes) * 1e-9
        compute_s = sum(float(r["measured_median_ns"] or 0) for r in passes
                        if r["kind"] == "gemm" or r["kind"].startswith("attention")) * 1e-9
        share, tflops, gbps = compute_s / busy_s, clock["tflop"] / busy_s, clock["gb"] / busy_s
        scale = (mhz / model["max_sm_clock_MHz"]) ** model["clock_exponent"]
        calibrate_W = model["static_W"] + scale * (model["pJ_per_flop"] * tflops + model["pJ_per_byte"] * 1e-3 * gbps)
        cells = [calibrate_W] + [power_W(mhz, share, tflops, gbps, *forms[name]) for name in forms]
        print(f"| {run} | {mhz:.0f} MHz, {watts:.0f} W | {share:.3f}, {tflops:.0f}, {gbps:.0f} | "
              + " | ".join(f"{p:.0f} W ({100 * (p / watts - 1):+.1f}%)" for p in cells) + " |")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--steps":
        steps_table(sys.argv[2], sys.argv[3], sys.argv[4:])
    else:
        loads_table()
