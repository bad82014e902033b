#!/usr/bin/env python3
"""The SM clock and power a GPU holds under back-to-back bf16 GEMMs of one shape, shape by shape (issue 37 item 1,
docs/ACCURACY.md "the step clock by micro-batch size"): does a step of smaller GEMMs hold a higher clock than its FLOP
rate says? Each shape runs SECONDS back to back (torch.matmul, CUDA events for the rate), nvidia-smi samples the clock
and power every 100 ms, and the samples of the last SECONDS - SETTLE seconds give the median clock and power. The
shapes alternate twice (A B C A B C) so that a drift of the GPU's temperature shows as a difference between repeats.
PyTorch is a reference here, never a part of twin. Prints one line per shape and repeat, and a check that each repeat
agrees with the other within 2% in clock (exit 1 otherwise: the measurement is not stable enough to read).
Usage (device): python3 tests/gpu/gemm_size_clock.py --out DIR [--seconds 6] [--settle 2]"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time

from torch_timing import torch_on_gpu

# m x n x k: the curve's load, and Qwen3-4B's two largest GEMMs at micro-batch 1 and 4 (seq 4,096: m = 4,096 x mbs).
SHAPES = [(8192, 8192, 8192), (4096, 9728, 2560), (16384, 9728, 2560), (4096, 2560, 9728), (16384, 2560, 9728)]


def sample_clocks(path):
    return subprocess.Popen(['nvidia-smi', '--query-gpu=timestamp,clocks.sm,power.draw', '--format=csv,noheader,nounits',
                             '-lms', '100'], stdout=open(path, 'w'), stderr=subprocess.DEVNULL)


def read_samples(path, start, end):
    """(clock MHz, power W) of the samples between two epoch times."""
    rows = []
    for line in open(path):
        parts = [p.strip() for p in line.split(',')]
        if len(parts) != 3:
            continue
        try:
            at = datetime.datetime.strptime(parts[0], '%Y/%m/%d %H:%M:%S.%f').timestamp()
            clock, power = float(parts[1]), float(parts[2])
        except ValueError:
            continue
        if start <= at <= end:
            rows.append((clock, power))
    return rows


def run_shape(torch, m, n, k, seconds):
    """Back-to-back matmuls for `seconds`; their TFLOP/s by CUDA events."""
    a = torch.randn(m, k, device='cuda', dtype=torch.bfloat16)
    b = torch.randn(k, n, device='cuda', dtype=torch.bfloat16)
    c = torch.empty(m, n, device='cuda', dtype=torch.bfloat16)
    torch.matmul(a, b, out=c)
    torch.cuda.synchronize()
    begin, done = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    count, start = 0, time.time()
    begin.record()
    while time.time() - start < seconds:
        for _ in range(20):
            torch.matmul(a, b, out=c)
        count += 20
        if count % 200 == 0:  # keep the host within a few ms of the GPU, so that `seconds` is the GPU's time
            torch.cuda.synchronize()
    done.record()
    torch.cuda.synchronize()
    elapsed_s = begin.elapsed_time(done) * 1e-3
    return 2.0 * m * n * k * count / elapsed_s * 1e-12


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--out', required=True)
    parser.add_argument('--seconds', type=float, default=6.0)
    parser.add_argument('--settle', type=float, default=2.0)
    args = parser.parse_args()
    torch = torch_on_gpu()
    if torch is None:
        return
    os.makedirs(args.out, exist_ok=True)
    clocks_path = os.path.join(args.out, 'gpu_clocks.csv')
    sampler = sample_clocks(clocks_path)
    run_shape(torch, 8192, 8192, 8192, 2.0)  # heat
    results = []
    try:
        for repeat in range(2):
            for m, n, k in SHAPES:
                start = time.time()
                tflops = run_shape(torch, m, n, k, args.seconds)
                end = time.time()
                time.sleep(0.3)  # the sampler's last line
                samples = read_samples(clocks_path, start + args.settle, end)
                clock = statistics.median(s[0] for s in samples) if samples else 0
                power = statistics.median(s[1] for s in samples) if samples else 0
                results.append({'repeat': repeat, 'm': m, 'n': n, 'k': k, 'tflops': tflops, 'sm_clock_MHz': clock,
                                'power_W': power, 'samples': len(samples)})
                print(f"repeat {repeat} {m}x{n}x{k}: {tflops:.0f} TFLOP/s, {clock:.0f} MHz, {power:.0f} W "
                      f"({len(samples)} samples), {tflops / clock * 1e3 if clock else 0:.1f} GFLOP/s per MHz", flush=True)
    finally:
        sampler.terminate()
    json.dump(results, open(os.path.join(args.out, 'gemm_size_clock.json'), 'w'), indent=1)
    status = 0
    for m, n, k in SHAPES:
        pair = [r for r in results if (r['m'], r['n'], r['k']) == (m, n, k)]
        if len(pair) == 2 and pair[0]['sm_clock_MHz'] > 0:
            drift = abs(pair[1]['sm_clock_MHz'] / pair[0]['sm_clock_MHz'] - 1)
            ok = drift <= 0.02
            status |= not ok
            print(f"{m}x{n}x{k}: repeats {drift * 100:.1f}% apart in clock ({'ok' if ok else 'NOT within 2%'})")
    sys.exit(status)


if __name__ == '__main__':
    main()
