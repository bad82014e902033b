#!/usr/bin/env python3
"""Does it matter which operand of an FP8 GEMM is the E5M2 gradient? PyTorch's torch._scaled_mm (cuBLASLt on the
device machine: a reference measurement, not part of twin) times each shape three ways, interleaved over rounds
after a warm-up at the loaded clock: both operands E4M3, the E5M2 one as A (a data gradient dY W, and how twin
calibrate timed every hybrid-format FP8 GEMM until 2026-12-02) and as B (a weight gradient X^T dY, as twin execute runs
it). Per-tensor scales of 1, bf16 output.

usage: fp8_e5m2_side_probe.py [--rounds N] > probe.jsonl   (the last line: the summary)
"""
import argparse
import json
import statistics

import torch

SHAPES = [  # (name, m, n, k): D[m, n] = A[m, k] B[k, n]
    ("gpt-7.5b qkv wgrad, 4k tokens", 4096, 12288, 4096),
    ("gpt-7.5b proj wgrad, 4k tokens", 4096, 4096, 4096),
    ("gpt-7.5b fc1 wgrad, 4k tokens", 4096, 16384, 4096),
    ("gpt-7.5b fc2 wgrad, 4k tokens", 16384, 4096, 4096),
    ("llama-7b fc1 wgrad, 4k tokens", 4096, 22016, 4096),
    ("llama-7b fc2 wgrad, 4k tokens", 11008, 4096, 4096),
    ("8k cube", 8192, 8192, 8192),
    ("2k cube", 2048, 2048, 2048),
]


def time_us(fn, reps):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / reps


def operand(rows, cols, dtype, column_major):
    x = torch.randn(rows, cols, device="cuda").to(dtype)
    return x.t().contiguous().t() if column_major else x


def probe(name, m, n, k, rounds):
    one = torch.ones((), device="cuda")
    e4, e5 = torch.float8_e4m3fn, torch.float8_e5m2
    variants = {}
    for label, a_type, b_type in (("e4m3 x e4m3", e4, e4), ("e5m2 as A", e5, e4), ("e5m2 as B", e4, e5)):
        a, b = operand(m, k, a_type, False), operand(k, n, b_type, True)  # cuBLASLt's FP8 "TN" layout
        variants[label] = (lambda a=a, b=b: torch._scaled_mm(a, b, one, one, out_dtype=torch.bfloat16))
    reps = max(5, min(100, int(2e5 / (2e-6 * m * n * k / 1400))))
    samples = {v: [] for v in variants}
    for fn in variants.values():
        time_us(fn, 3)
    for _ in range(rounds):
        for v, fn in variants.items():
            samples[v].append(time_us(fn, reps))
    row = {"name": name, "m": m, "n": n, "k": k}
    for v in variants:
        row[v] = round(statistics.median(samples[v]), 2)
    row["B over A"] = round(row["e5m2 as B"] / row["e5m2 as A"], 4)
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    warm = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    time_us(lambda: warm @ warm, 200)
    rows = [probe(*shape, args.rounds) for shape in SHAPES]
    for row in rows:
        print(json.dumps(row), flush=True)
    ratios = [r["B over A"] for r in rows]
    print(json.dumps({"device": torch.cuda.get_device_name(), "B over A": ratios,
                      "median B over A": statistics.median(ratios)}), flush=True)


if __name__ == "__main__":
    main()
