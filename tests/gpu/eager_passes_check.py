"""Eager PyTorch's memory passes per norm and activation, measured against what twin's pytorch-fsdp2 lowering counts
(strategies/pytorch_fsdp2.hpp eager_extra_bytes_per_element, plus the fused op's own bytes).

For each function, as eager PyTorch 2.x runs it on bf16 rows x cols (the Llama reference's RMSNorm and RoPE from
tests/gpu/pytorch_baseline.py, F.layer_norm, the gated and plain activations as Hugging Face's models write them),
the forward and the backward are each timed under torch.profiler: the CUDA kernels they launch (counted) and the sum of
their times. A pass over the same rows (torch.neg: 2 + 2 bytes an element; copy_ would be a cudaMemcpy, no kernel)
gives the bandwidth that turns a time into bytes: a pass's effective bytes per element = its kernels' time x that
pass's bytes per second / elements.

Asserted: the kernels each pass launches, as the decomposition above counts them (under PyTorch 2.11, the device
machines' version: another version may fuse or split differently, and the table says which it was measured on).
Reported, not asserted: each pass's time as bytes at a plain pass's bandwidth against the bytes counted, the measure
of how far below a copy's bandwidth the eager kernels run (fp32 passes, row reductions and broadcasts run slower than
a copy; the fold's memory-bound prior absorbs that, docs/ACCURACY.md "PyTorch FSDP2 and DTensor TP on four H200s").
Usage (device): python3 tests/gpu/eager_passes_check.py [--rows 16384] [--cols 4096]
"""
import argparse, json, sys

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

# bytes per element: (fused forward, eager extra forward, fused backward, eager extra backward), from
# strategies/pytorch_fsdp2.hpp and the fused ops' prices (cost/compute_kinds.cpp: a norm 4 / 6, an activation
# over its ffn elements 6 / 10 gated and 4 / 6 plain, RoPE 4 / 4). Gated ones count per output element.
COUNTED = {
    "rmsnorm": (4, 32, 6, 58),
    "layernorm": (4, 0, 6, 4),
    "rope": (4, 16, 4, 14),
    "swiglu": (6, 4, 10, 8),
    "geglu": (6, 4, 10, 8),
    "gelu": (4, 0, 6, 0),
    "squared_relu": (4, 4, 6, 10),
    "quick_geglu": (6, 26, 10, 42),
}
# Kernels per pass (forward, backward) under PyTorch 2.11: the reference's RMSNorm (cast, pow, mean, + eps, rsqrt,
# product, cast back, weight; its autograd 15), F.layer_norm (one; the input gradient and the weight's and bias's),
# RoPE (two casts of the tables, two products, a negation, a cat, a sum; backward 5), a gated activation (act and
# product; backward two products and act's), GeLU (one each way), squared ReLU (relu, square; backward 3), gpt-oss's
# clamped GLU (7; backward 15).
KERNELS = {
    "rmsnorm": (8, 15), "layernorm": (1, 2), "rope": (7, 5), "swiglu": (2, 3), "geglu": (2, 3), "gelu": (1, 1),
    "squared_relu": (2, 3), "quick_geglu": (7, 15),
}


def rmsnorm(x, w):  # tests/gpu/pytorch_baseline.py's RMSNorm.forward
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)
    return xf.type_as(x) * w


def rope(x, cos, sin):  # tests/gpu/pytorch_baseline.py's apply_rope
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos.to(x.dtype) + torch.cat((-x2, x1), dim=-1) * sin.to(x.dtype)


def quick_geglu(gate, up, alpha=1.702, limit=7.0):  # Hugging Face's GptOssExperts
    gate = gate.clamp(min=None, max=limit)
    up = up.clamp(min=-limit, max=limit)
    glu = gate * torch.sigmoid(gate * alpha)
    return (up + 1) * glu


def case(name, rows, cols):
    """The function, its inputs (leaves that need gradients) and the output's element count."""
    dev, bf = "cuda", torch.bfloat16
    x = lambda: torch.randn(rows, cols, device=dev, dtype=bf, requires_grad=True)
    w = lambda: torch.ones(cols, device=dev, dtype=bf, requires_grad=True)
    if name == "rmsnorm":
        return rmsnorm, [x(), w()]
    if name == "layernorm":
        return (lambda a, g, b: F.layer_norm(a, (cols,), g, b)), [x(), w(), torch.zeros_like(w(), requires_grad=True)]
    if name == "rope":
        head = 128
        angles = torch.randn(rows, head, device=dev)
        cos, sin = angles.cos(), angles.sin()
        return (lambda a: rope(a.view(rows, cols // head, head), cos[:, None, :], sin[:, None, :])), [x()]
    if name in ("swiglu", "geglu", "quick_geglu"):
        act = {"swiglu": lambda g, u: F.silu(g) * u, "geglu": lambda g, u: F.gelu(g, approximate="tanh") * u,
               "quick_geglu": quick_geglu}[name]
        return act, [x(), x()]
    if name == "gelu":
        return (lambda a: F.gelu(a, approximate="tanh")), [x()]
    if name == "squared_relu":
        return (lambda a: torch.square(F.relu(a))), [x()]
    raise ValueError(name)


def kernels(fn):
    """The CUDA kernels `fn` launches: (count, summed microseconds)."""
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA], acc_events=True) as prof:
        fn()
        torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA and
              not e.name.startswith("Memcpy") and not e.name.startswith("Memset")]
    return len(events), sum(e.time_range.elapsed_us() for e in events)


def measure(name, rows, cols, repeats=5):
    fn, inputs = case(name, rows, cols)
    out = fn(*inputs)  # warm-up: the allocator and the kernels' first launch
    out.backward(torch.randn_like(out))
    best = {}
    for _ in range(repeats):
        for t in inputs:
            t.grad = None
        out = None
        def forward():
            nonlocal out
            out = fn(*inputs)
        n_f, us_f = kernels(forward)
        grad = torch.randn_like(out)
        n_b, us_b = kernels(lambda: out.backward(grad))
        for phase, n, us in (("forward", n_f, us_f), ("backward", n_b, us_b)):
            if phase not in best or us < best[phase][1]:
                best[phase] = (n, us)
    return best


def copy_bytes_per_us(rows, cols):
    """A kernel that reads and writes every element once (a copy made by cudaMemcpy is no kernel: torch.neg)."""
    a = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16)
    b = torch.empty_like(a)
    torch.neg(a, out=b)
    us = min(kernels(lambda: torch.neg(a, out=b))[1] for _ in range(5))
    if us <= 0:
        sys.exit("eager_passes_check: the profiler recorded no kernel for the copy")
    return 4 * rows * cols / us


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=16384)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--out", default=None, help="write the results as JSON lines here")
    args = ap.parse_args()
    torch.manual_seed(0)
    bandwidth = copy_bytes_per_us(args.rows, args.cols)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}: a copy at {bandwidth / 1e3:.0f} GB/s")
    elements = args.rows * args.cols
    failures, lines = [], []
    for name, (fused_f, extra_f, fused_b, extra_b) in COUNTED.items():
        best = measure(name, args.rows, args.cols)
        for phase, counted in (("forward", fused_f + extra_f), ("backward", fused_b + extra_b)):
            n, us = best[phase]
            effective = us * bandwidth / elements
            ratio = effective / counted
            line = {"op": name, "phase": phase, "kernels": n, "us": round(us, 1),
                    "effective_bytes_per_element": round(effective, 2), "counted": counted, "ratio": round(ratio, 3)}
            lines.append(line)
            print(json.dumps(line))
            expected = KERNELS[name][0 if phase == "forward" else 1]
            if n != expected:
                failures.append(f"{name} {phase}: {n} kernels launched, {expected} in the decomposition counted")
    return finish("eager_passes_check", lines, failures, args.out)


def finish(check, lines, failures, out):
    """Writes the lines as JSON lines to `out` (if given), prints the failures and the verdict; the exit status."""
    if out:
        with open(out, "w") as f:
            f.writelines(json.dumps(line) + "\n" for line in lines)
    for failure in failures:
        print("FAIL", failure)
    print(f"{check}:", "failed" if failures else "passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
