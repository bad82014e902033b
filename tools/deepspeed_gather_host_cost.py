#!/usr/bin/env python3
"""Host and GPU time, per rank of the data-parallel group, of one ZeRO-3 parameter all-gather as DeepSpeed 0.3.x
(microsoft/DeepSpeed c83e49f, 2021-04, partition_parameters.py `_allgather_param`) issued it through PyTorch's
list form of `torch.distributed.all_gather` (ProcessGroupNCCL::allgather, pytorch/pytorch torch/lib/c10d of 2020-21:
the outputs gathered into one flat tensor, then copied out one rank's part at a time on the NCCL stream).

The collective itself is not run: what is timed is the work around it that grows with the group size n, on one GPU:
  python_loop   DeepSpeed's loop over the n ranks: a `narrow` view of each rank's part, `get_rank(group)` per rank
  copy_out      PyTorch's n copies of a rank's part out of the flat tensor (issued here from Python, so this also
                counts Python's call overhead that the C++ loop of ProcessGroupNCCL does not have: an upper bound)
  gpu_copy      the GPU time of those n copies when the host has issued them all ahead (CUDA events)
Usage: python3 tools/deepspeed_gather_host_cost.py [--out FILE.json]   (one CUDA GPU; prints a table, writes JSON)
"""
import argparse
import json
import os
import platform
import time

import torch
import torch.distributed as dist

# The linear weights of the models of Narayanan et al. 2021 Table 2 (elements): fc1 of the 174.6B (h 12288) and
# of the 529.6B (h 20480) GPT models; the group sizes of its ZeRO-3 rows.
WEIGHTS = {"fc1_h12288": 4 * 12288 * 12288, "fc1_h20480": 4 * 20480 * 20480}
GROUPS = [384, 640, 768, 1120, 1536, 2240]
REPEATS = 5


def python_loop(flat, part, n, group, shard):
    partitions = []
    for i in range(n):
        partitions.append(flat.narrow(0, part * i, part))
        if i == dist.get_rank(group=group):
            partitions[i].data.copy_(shard.data, non_blocking=True)
    return partitions


def copy_out(outputs, flat_parts):
    for out, src in zip(outputs, flat_parts):
        out.copy_(src, non_blocking=True)


def best_of(fn):
    best = float("inf")
    for _ in range(REPEATS):
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def measure(n, elements, group):
    part = elements // n
    flat = torch.zeros(part * n, dtype=torch.float16, device="cuda")
    flat_src = torch.empty_like(flat)
    shard = torch.ones(part, dtype=torch.float16, device="cuda")
    outputs = [t for t in flat.split(part)]
    sources = [t for t in flat_src.split(part)]
    loop_s = best_of(lambda: python_loop(flat, part, n, group, shard))
    copy_s = best_of(lambda: copy_out(outputs, sources))
    # GPU time of the n copies, the host far ahead: a long kernel first holds the stream while they are issued.
    gpu_best = float("inf")
    for _ in range(REPEATS):
        torch.cuda.synchronize()
        torch.cuda._sleep(200_000_000)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        copy_out(outputs, sources)
        end.record()
        torch.cuda.synchronize()
        gpu_best = min(gpu_best, start.elapsed_time(end) / 1e3)
    return {"group_size": n, "part_elements": part, "python_loop_us_per_rank": loop_s / n * 1e6,
            "copy_out_host_us_per_rank": copy_s / n * 1e6, "copy_out_gpu_us_per_rank": gpu_best / n * 1e6}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    args = parser.parse_args()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29531")
    dist.init_process_group("nccl", rank=0, world_size=1)
    group = dist.new_group([0])
    torch.cuda.init()
    rows = []
    for weight, elements in WEIGHTS.items():
        for n in GROUPS:
            row = measure(n, elements, group)
            row["weight"] = weight
            rows.append(row)
            print(f"{weight} n={n:5d}: python loop {row['python_loop_us_per_rank']:.2f} us/rank, copies issued "
                  f"{row['copy_out_host_us_per_rank']:.2f} us/rank (host), {row['copy_out_gpu_us_per_rank']:.2f} us/rank (GPU)",
                  flush=True)
    result = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "python": platform.python_version(),
              "cpu": platform.processor() or platform.machine(), "rows": rows}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
