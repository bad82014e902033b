#!/usr/bin/env python3
"""The profiles `tests/gpu/fp8_check.sh` predicts the clock curves with.
  python3 tests/gpu/fp8_benchmark_profiles.py benchmarks IN OUT      # IN's micro-benchmarks alone
  python3 tests/gpu/fp8_benchmark_profiles.py bf16-curve IN OUT      # IN without its FP8 sustained-clock curve
`benchmarks`: each traced shape back to the benchmark it replaced, a traced shape without one dropped (as the built-in
profile's keep_benchmarks_only does), so that `twin calibrate --scenario` then measures the shapes the traces held and
the sustained-clock curves price the steps (traced shapes hold the training clock of the runs they came from, and the
simulator does not add a curve's clock on top of them). `bf16-curve`: every GEMM at the BF16 curve's clock, the model
before 2026-11-29."""
import json
import sys


def benchmarks_only(measured):
    kept = {}
    for key, m in measured.items():
        if "source" not in m:
            kept[key] = m
        elif m.get("benchmark_ns", 0) > 0:
            ns = m["benchmark_ns"]
            kept[key] = {"median_ns": ns, "p10_ns": ns, "p90_ns": ns, "samples": 1}
    return kept


def main():
    what, source, target = sys.argv[1:4]
    profile = json.load(open(source))
    for gpu in profile["gpus"]:
        if what == "benchmarks":
            gpu["measured"] = benchmarks_only(gpu["measured"])
        elif what == "bf16-curve":
            gpu.pop("sustained_clock_fp8", None)
        else:
            sys.exit(f"unknown variant {what}: expected benchmarks or bf16-curve")
    json.dump(profile, open(target, "w"), indent=1)


if __name__ == "__main__":
    main()
