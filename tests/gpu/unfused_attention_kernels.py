#!/usr/bin/env python3
"""Unfused attention kernel by kernel, timed on this GPU: the kernels Megatron-LM's core attention launches without a
fused kernel (cost/unfused_attention.hpp), built from PyTorch's own ops: torch.baddbmm for Q K^T, one softmax kernel
over the scores (Megatron's fused scale-mask-softmax reads and writes them once, as torch.softmax does), dropout
(torch's native_dropout: the dropped scores and a one-byte mask), torch.bmm for P V; the backward through autograd
(dropout's and softmax's backward, two batched GEMMs per product). 16-bit scores, CUDA events, the median of --iters
after --warmup, each forward kernel alone and the forward and backward whole. For each kernel: its time, its FLOPs'
rate and its bytes' rate over the scores, so that a batched GEMM's time can be read against its FLOPs and its pass
over the scores (the longer of the two, the cost model's rule, or their sum, the rule before 2026-12-01).

  python3 tests/gpu/unfused_attention_kernels.py --out DIR     # DIR/unfused_attention.{json,md}
"""
import json
import os
import statistics

from torch_timing import timing_arguments, torch_on_gpu

# (batch, heads, seq, head_dim): GPT-1.7B of Narayanan et al. 2021 Table 1 (24 heads of 96 at micro-batch 8), a
# GPT-3 layer under TP 8 (96 heads of 128 / 8, micro-batch 1), Korthikanti's 22B under TP 8 (64 / 8 heads of 96,
# micro-batch 4), and two other head dims.
SHAPES = [(8, 24, 2048, 96), (1, 12, 2048, 128), (4, 8, 2048, 96), (2, 16, 2048, 64), (1, 32, 4096, 128)]
DROPOUT = 0.1


def median_ms(torch, fn, warmup, iters):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def time_shape(torch, b, h, s, d, warmup, iters):
    dtype = torch.bfloat16
    q = torch.randn(b * h, s, d, device="cuda", dtype=dtype, requires_grad=True)
    k = torch.randn(b * h, s, d, device="cuda", dtype=dtype, requires_grad=True)
    v = torch.randn(b * h, s, d, device="cuda", dtype=dtype, requires_grad=True)
    scores = torch.empty(b * h, s, s, device="cuda", dtype=dtype)
    scale = d ** -0.5

    def qk():
        return torch.baddbmm(scores, q, k.transpose(1, 2), beta=0.0, alpha=scale)

    def forward():
        p = torch.softmax(qk(), dim=-1)
        p = torch.nn.functional.dropout(p, DROPOUT, training=True)
        return torch.bmm(p, v)

    with torch.no_grad():
        s_scores = qk()
        p_scores = torch.softmax(s_scores, dim=-1)
        dropped = torch.nn.functional.dropout(p_scores, DROPOUT, training=True)
        kernels_ms = {
            "qk": median_ms(torch, qk, warmup, iters),
            "softmax": median_ms(torch, lambda: torch.softmax(s_scores, dim=-1), warmup, iters),
            "dropout": median_ms(torch, lambda: torch.nn.functional.dropout(p_scores, DROPOUT, training=True),
                                 warmup, iters),
            "pv": median_ms(torch, lambda: torch.bmm(dropped, v), warmup, iters),
        }
    grad = torch.randn(b * h, s, d, device="cuda", dtype=dtype)
    forward_ms = median_ms(torch, forward, warmup, iters)

    def forward_backward():
        out = forward()
        out.backward(grad)

    whole_ms = median_ms(torch, forward_backward, warmup, iters)
    return kernels_ms, forward_ms, whole_ms - forward_ms


def main():
    args = timing_arguments(__doc__, "out/unfused_attention")
    torch = torch_on_gpu()
    if torch is None:
        return 0
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for b, h, s, d in SHAPES:
        kernels_ms, forward_ms, backward_ms = time_shape(torch, b, h, s, d, args.warmup, args.iters)
        elements = b * h * s * s
        product_flops = 2.0 * elements * d
        row = {"batch": b, "heads": h, "seq": s, "head_dim": d, "score_elements": elements,
               "kernels_ms": kernels_ms, "forward_ms": forward_ms, "backward_ms": backward_ms,
               "product_tflops": {n: product_flops / (kernels_ms[n] * 1e9) for n in ("qk", "pv")},
               "pass_GBps": {n: 2.0 * elements * passes / (kernels_ms[n] * 1e6)
                             for n, passes in (("qk", 1), ("softmax", 2), ("dropout", 2.5), ("pv", 1))}}
        rows.append(row)
        print(json.dumps(row), flush=True)
    device = torch.cuda.get_device_name()
    with open(os.path.join(args.out, "unfused_attention.json"), "w") as f:
        json.dump({"device": device, "torch": torch.__version__, "dropout": DROPOUT, "rows": rows}, f, indent=1)
    with open(os.path.join(args.out, "unfused_attention.md"), "w") as f:
        f.write(f"{device}, torch {torch.__version__}, bf16, dropout {DROPOUT}; ms (median of {args.iters})\n\n")
        f.write("| b | h | s | d | Q K^T | softmax | dropout | P V | forward | backward | Q K^T TFLOP/s | Q K^T GB/s |\n")
        f.write("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
        for r in rows:
            k = r["kernels_ms"]
            f.write(f"| {r['batch']} | {r['heads']} | {r['seq']} | {r['head_dim']} | {k['qk']:.3f} | {k['softmax']:.3f} "
                    f"| {k['dropout']:.3f} | {k['pv']:.3f} | {r['forward_ms']:.3f} | {r['backward_ms']:.3f} "
                    f"| {r['product_tflops']['qk']:.0f} | {r['pass_GBps']['qk']:.0f} |\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
