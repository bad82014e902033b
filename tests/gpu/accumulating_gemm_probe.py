#!/usr/bin/env python3
"""Weight-gradient GEMMs that write or add to a gradient buffer, timed against a plain 16-bit product (PyTorch's
cuBLAS on the device machine: a reference measurement, not part of twin).

For each shape dW[m, n] = dY^T[m, k] X[k, n] it times, interleaved over rounds after a warm-up that brings the clock
to its loaded level: the product written in bf16 (beta 0, what calibration times), added to a bf16 buffer (beta 1:
twin execute's later micro-batches), written into an fp32 buffer and added to one (Megatron-Core's main_grad with
gradient-accumulation fusion). Buffers and operands rotate over sets larger than L2, as a step's gradient buffer was
last touched a micro-batch before. Beside each, the price twin gives the extra bytes (cost/compute_kinds.cpp:
2, 2 and 6 bytes an element) at this GPU's measured copy bandwidth, so that the rule can be compared with the
measurement shape by shape.

usage: accumulating_gemm_probe.py [--rounds N] > probe.jsonl   (the last line: the summary)
"""
import argparse
import json
import statistics

import torch

SHAPES = [  # (name, m, n, k): dW's rows, columns, and the tokens reduced over
    ("llama-7b qkv, 4k tokens", 12288, 4096, 4096),
    ("llama-7b proj, 4k tokens", 4096, 4096, 4096),
    ("llama-7b fc1, 4k tokens", 22016, 4096, 4096),
    ("llama-7b fc2, 4k tokens", 4096, 11008, 4096),
    ("gpt-7.5b fc1, 4k tokens", 16384, 4096, 4096),
    ("llama-7b qkv, 2k tokens", 12288, 4096, 2048),
    ("llama-7b qkv, 8k tokens", 12288, 4096, 8192),
    ("llama-7b qkv, 16k tokens", 12288, 4096, 16384),
    ("70b fc1 at tp 8, 4k tokens", 7168, 8192, 4096),
    ("70b qkv at tp 8, 2k tokens", 1280, 8192, 2048),
    ("2k cube", 2048, 2048, 2048),
    ("1.3b fc1, 8k tokens", 8192, 2048, 8192),
]
EXTRA_BYTES = {"added_bf16": 2, "written_fp32": 2, "added_fp32": 6}
L2_BYTES = 64 << 20


def sets_for(bytes_one):
    return max(2, min(8, -(-3 * L2_BYTES // max(bytes_one, 1))))


def time_us(fn, reps):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for i in range(reps):
        fn(i)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / reps


def copy_bandwidth_GBps():
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    us = time_us(lambda i: dst.copy_(src), 20)
    return 2 * src.numel() / (us * 1e3)  # read and write


def probe(name, m, n, k, rounds, bandwidth):
    dev, bf16, fp32 = "cuda", torch.bfloat16, torch.float32
    ops = sets_for(2 * k * (m + n))
    dy = [torch.randn(k, m, device=dev, dtype=bf16) for _ in range(ops)]
    x = [torch.randn(k, n, device=dev, dtype=bf16) for _ in range(ops)]
    outs = sets_for(4 * m * n)
    c16 = [torch.zeros(m, n, device=dev, dtype=bf16) for _ in range(outs)]
    c32 = [torch.zeros(m, n, device=dev, dtype=fp32) for _ in range(outs)]
    variants = {
        "written_bf16": lambda i: torch.mm(dy[i % ops].t(), x[i % ops], out=c16[i % outs]),
        "added_bf16": lambda i: c16[i % outs].addmm_(dy[i % ops].t(), x[i % ops]),
        "written_fp32": lambda i: torch.mm(dy[i % ops].t(), x[i % ops], out_dtype=fp32, out=c32[i % outs]),
        "added_fp32": lambda i: torch.addmm(c32[i % outs], dy[i % ops].t(), x[i % ops], out_dtype=fp32,
                                            out=c32[i % outs]),
    }
    reps = max(5, min(50, int(2e5 / (2e-6 * m * n * k / 700))))  # about 0.2 s a variant a round at 700 TFLOP/s
    samples = {v: [] for v in variants}
    for v, fn in variants.items():
        time_us(fn, 3)
    for _ in range(rounds):
        for v, fn in variants.items():
            samples[v].append(time_us(fn, reps))
    row = {"name": name, "m": m, "n": n, "k": k}
    base = statistics.median(samples["written_bf16"])
    row["written_bf16_us"] = round(base, 2)
    for v in ("added_bf16", "written_fp32", "added_fp32"):
        t = statistics.median(samples[v])
        priced = EXTRA_BYTES[v] * m * n / (bandwidth * 1e3)
        row[v + "_us"] = round(t, 2)
        row[v + "_extra_us"] = round(t - base, 2)
        row[v + "_priced_extra_us"] = round(priced, 2)
        row[v + "_ratio"] = round(t / base, 4)
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    warm_a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    time_us(lambda i: warm_a @ warm_a, 200)  # the clock at its loaded level before anything is timed
    bandwidth = copy_bandwidth_GBps()
    rows = []
    for name, m, n, k in SHAPES:
        row = probe(name, m, n, k, args.rounds, bandwidth)
        rows.append(row)
        print(json.dumps(row), flush=True)
    summary = {"copy_bandwidth_GBps": round(bandwidth, 1), "device": torch.cuda.get_device_name()}
    for v in ("added_bf16", "written_fp32", "added_fp32"):
        measured = sum(r[v + "_extra_us"] for r in rows)
        priced = sum(r[v + "_priced_extra_us"] for r in rows)
        summary[v] = {"measured_extra_us": round(measured, 1), "priced_extra_us": round(priced, 1),
                      "priced_over_measured": round(priced / measured, 3) if measured > 0 else None,
                      "ratios": [r[v + "_ratio"] for r in rows]}
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
