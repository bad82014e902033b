"""Independent check of a calibrated profile, run by tests/gpu/run.sh on the GPU machine.

Measures with PyTorch (its own cuBLAS and NCCL calls, CUDA events, nccl-tests' timing and busbw) GEMM
shapes and collective sizes that `twin calibrate` did not measure, and compares them with what the profile
predicts: GEMMs from the fitted efficiency model (kernel_cost.cpp's formula), collectives by log-log
interpolation in the measured tables and by the fitted link model. Writes a CSV and a Markdown table.
Usage: python3 check_profile.py PROFILE.json OUT_DIR
"""
import csv, json, math, os, sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

GEMMS = [  # (m, n, k, ta, tb), none of them in the calibration grid
    (3072, 3072, 3072, 0, 0), (6144, 6144, 6144, 0, 0), (8192, 5120, 5120, 0, 1),
    (2048, 16384, 6144, 0, 1), (16384, 3584, 8192, 0, 0), (5120, 8192, 12288, 1, 0),
    (12288, 12288, 12288, 0, 0), (1536, 1536, 1536, 0, 0)]
SIZES = [3 << 14, 3 << 18, 3 << 22, 3 << 26, 3 << 28]  # 48 KiB .. 768 MiB, between measured powers of 2
COLLECTIVES = ["all_reduce", "all_gather", "reduce_scatter", "all_to_all"]
FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
          "reduce_scatter": lambda n: (n - 1) / n, "all_to_all": lambda n: (n - 1) / n}
STEPS = {"all_reduce": lambda n: 2 * (n - 1), "all_gather": lambda n: n - 1,
         "reduce_scatter": lambda n: n - 1, "all_to_all": lambda n: n - 1}


def eff(e, work):
    return e["peak"] if work <= 0 else e["peak"] * work / (work + e["half_work"])


def predict_gemm_ns(profile, m, n, k):
    gpu, spec = profile["gpus"][0], profile["provenance"]["gpu_spec"]
    flops, bytes_ = 2.0 * m * n * k, 2.0 * (m * k + k * n + m * n)
    compute = flops / (spec["peak_bf16_tflops"] * 1e3 * eff(gpu["gemm"], flops))
    memory = bytes_ / (spec["hbm_bandwidth_GBps"] * eff(gpu["memory_bound"], bytes_))
    return max(compute, memory)


def time_cuda(fn, warmup, iters):
    for _ in range(warmup):
        fn()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(iters):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) * 1e3 / iters  # us


def check_gemms(profile):
    rows = []
    for m, n, k, ta, tb in GEMMS:
        a = torch.empty((k, m) if ta else (m, k), device="cuda", dtype=torch.bfloat16).uniform_(-1, 1)
        b = torch.empty((n, k) if tb else (k, n), device="cuda", dtype=torch.bfloat16).uniform_(-1, 1)
        aa, bb = (a.t() if ta else a), (b.t() if tb else b)
        c = torch.empty((m, n), device="cuda", dtype=torch.bfloat16)
        measured_us = time_cuda(lambda: torch.matmul(aa, bb, out=c), 5, 30)
        predicted_us = predict_gemm_ns(profile, m, n, k) * 1e-3
        rows.append({"kind": "gemm", "shape": f"m={m} n={n} k={k} ta={ta} tb={tb}", "ranks": 1, "size_B": "",
                     "measured_us": measured_us, "predicted_us": predicted_us,
                     "error_pct": 100 * (predicted_us - measured_us) / measured_us, "limit_pct": 5,
                     "tflops": 2.0 * m * n * k / measured_us * 1e-6, "busbw_GBps": "", "profile_busbw_GBps": ""})
    return rows


def table_for(profile, name, n):
    for t in profile["provenance"]["collectives"]:
        if t["collective"] == name and t["group_size"] == n and t["nodes"] == 1:
            return t
    return None


def interpolate(rows, size):
    pts = [(r[0], r[1]) for r in rows]
    i = 1
    while i + 1 < len(pts) and pts[i][0] < size:
        i += 1
    (x0, y0), (x1, y1) = pts[i - 1], pts[i]
    x0, x1, y0, y1, x = map(math.log, (x0, x1, y0, y1, size))
    return math.exp(y0 + (y1 - y0) * (x - x0) / (x1 - x0))


def worker(rank, world, port, profile, queue):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), NCCL_NVLS_ENABLE="0")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    rows = []
    for name in COLLECTIVES:
        for size in SIZES:
            count = size // 4 // world * world
            s = count * 4
            x = torch.empty(count, device="cuda").uniform_(-1, 1)
            y = torch.empty(count, device="cuda")
            piece = torch.empty(count // world, device="cuda")
            op = {"all_reduce": lambda: dist.all_reduce(x),
                  "all_gather": lambda: dist.all_gather_into_tensor(y, piece),
                  "reduce_scatter": lambda: dist.reduce_scatter_tensor(piece, x),
                  "all_to_all": lambda: dist.all_to_all_single(y, x)}[name]
            iters = max(5, min(100, int(4 * 2**30 / s)))
            t = torch.tensor([time_cuda(op, max(2, iters // 5), iters)], device="cuda")
            dist.all_reduce(t)
            measured_us = t.item() / world
            if rank == 0:
                table = table_for(profile, name, world)
                interp = interpolate(table["rows"], s)
                fit = table["fit"]
                model = STEPS[name](world) * fit["latency_us"] + FACTOR[name](world) * s / (
                    table["nominal_bandwidth_GBps"] * 1e3 * fit["bandwidth"]["peak"])
                busbw = s / (measured_us * 1e3) * FACTOR[name](world)
                rows.append({"kind": name, "shape": f"S={s}", "ranks": world, "size_B": s, "measured_us": measured_us,
                             "predicted_us": interp, "error_pct": 100 * (interp - measured_us) / measured_us,
                             "limit_pct": 10, "tflops": "", "busbw_GBps": busbw,
                             "profile_busbw_GBps": s / (interp * 1e3) * FACTOR[name](world),
                             "fit_model_us": model, "fit_model_error_pct": 100 * (model - measured_us) / measured_us})
    if rank == 0:
        queue.put(rows)
    dist.destroy_process_group()


def main():
    profile_path, out_dir = sys.argv[1], sys.argv[2]
    profile = json.load(open(profile_path))
    rows = check_gemms(profile)
    world = torch.cuda.device_count()
    if world >= 2:
        ctx = mp.get_context("spawn")
        queue = ctx.Queue()
        procs = [ctx.Process(target=worker, args=(r, world, 29533, profile, queue)) for r in range(world)]
        for p in procs:
            p.start()
        rows += queue.get(timeout=300)
        for p in procs:
            p.join()
    fields = ["kind", "shape", "ranks", "size_B", "measured_us", "predicted_us", "error_pct", "limit_pct", "tflops",
              "busbw_GBps", "profile_busbw_GBps", "fit_model_us", "fit_model_error_pct"]
    with open(os.path.join(out_dir, "check.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, restval="")
        w.writeheader()
        w.writerows(rows)
    fmt = lambda v: f"{v:.2f}" if isinstance(v, float) else str(v)
    lines = ["| " + " | ".join(fields) + " | pass |", "|" + "---|" * (len(fields) + 1)]
    failures = 0
    for r in rows:
        ok = abs(r["error_pct"]) <= r["limit_pct"]
        failures += not ok
        lines.append("| " + " | ".join(fmt(r.get(k, "")) for k in fields) + f" | {'yes' if ok else 'NO'} |")
    lines.append(f"\n{len(rows) - failures} of {len(rows)} within their limit (GEMM 5%, collectives 10%)")
    text = "\n".join(lines)
    open(os.path.join(out_dir, "check.md"), "w").write(text + "\n")
    print(text)
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
