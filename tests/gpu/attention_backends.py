#!/usr/bin/env python3
"""Attention kernels as frameworks run them, timed on this GPU: PyTorch's scaled_dot_product_attention forced to
one backend at a time (cuDNN: what Transformer Engine prefers on Hopper, Megatron's "fused"; FlashAttention-2:
"flash"), bf16, causal, head dim 128, on the six shapes of docs/REFERENCES.md ("Attention on one H200"). FLOPs as
FlashAttention counts them (causal forward 2*b*h*s^2*d, backward 2.5x that), CUDA events, mean of --iters
after --warmup. The built-in profile's attention curves are fitted on these figures (docs/PROFILES.md).

  python3 tests/gpu/attention_backends.py --out DIR     # DIR/attention_backends.{json,md}
"""
import json
import os
import sys

from torch_timing import timing_arguments, torch_on_gpu

SHAPES = [(1, 32, 32, 4096), (1, 32, 8, 4096), (2, 32, 32, 4096), (1, 32, 8, 8192), (4, 40, 40, 2048), (1, 64, 8, 4096)]


def main():
    args = timing_arguments(__doc__, "out/attention")
    torch = torch_on_gpu()
    if torch is None:
        return 0
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as error:  # a PyTorch before 2.3
        print(f"skipped: this PyTorch has no torch.nn.attention ({error})")
        return 0
    backends = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}
    device = torch.cuda.get_device_name()
    rows = []
    for b, h, kvh, s in SHAPES:
        d = 128
        q = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        k = torch.randn(b, kvh, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        v = torch.randn(b, kvh, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        grad = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
        forward_flops = 2.0 * b * h * s * s * d
        row = {"batch": b, "heads": h, "kv_heads": kvh, "seq": s, "head_dim": d}
        for name, backend in backends.items():
            try:
                with sdpa_kernel(backend):
                    def forward():
                        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                                               enable_gqa=kvh != h)
                    for _ in range(args.warmup):
                        forward().backward(grad)
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    for _ in range(args.iters):
                        out = forward()
                    end.record()
                    torch.cuda.synchronize()
                    forward_ms = start.elapsed_time(end) / args.iters
                    outs = [forward() for _ in range(args.iters)]
                    start.record()
                    for out in outs:
                        out.backward(grad)
                    end.record()
                    torch.cuda.synchronize()
                    backward_ms = start.elapsed_time(end) / args.iters
                row[name] = {"forward_tflops": forward_flops / forward_ms / 1e9,
                             "backward_tflops": 2.5 * forward_flops / backward_ms / 1e9}
            except RuntimeError as error:  # e.g. no GQA support in a backend
                row[name] = {"error": str(error).splitlines()[0][:120]}
        rows.append(row)
        print(json.dumps(row), flush=True)
    os.makedirs(args.out, exist_ok=True)
    result = {"device": device, "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(), "rows": rows}
    with open(os.path.join(args.out, "attention_backends.json"), "w") as out:
        json.dump(result, out, indent=1)
    lines = [f"{device}, PyTorch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}", "",
             "| b, heads, kv heads, seq | cuDNN fwd / bwd TFLOP/s | flash fwd / bwd |", "| --- | --- | --- |"]
    for r in rows:
        cells = []
        for name in backends:
            x = r[name]
            cells.append("—" if "error" in x else f"{x['forward_tflops']:.0f} / {x['backward_tflops']:.0f}")
        lines.append(f"| {r['batch']}, {r['heads']}, {r['kv_heads']}, {r['seq']} | {cells[0]} | {cells[1]} |")
    with open(os.path.join(args.out, "attention_backends.md"), "w") as out:
        out.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
