"""Megatron-Core's eager expert kernels, measured against what twin's lowering counts for them
(strategies/megatron_expert_passes.hpp: kMegatronGluClampBytes, kMegatronExpertBiasBytes).

Two pieces of TEGroupedMLP (megatron/core/transformer/moe/experts.py at NVIDIA/Megatron-LM d7288711ba), written here
as that code writes them and run eagerly on bf16 tensors of gpt-oss-120b's experts at EP 8 (16 local experts, 1,024
routed copies each at micro-batch 1 and sequence 4,096, hidden 2,880, expert FFN 2,880):
  clamp: weighted_bias_quick_geglu_impl's clamp of FC1's output before its fused function
         (megatron/core/fusions/fused_bias_geglu.py): chunk, gate.clamp(max), linear.clamp(min, max), cat;
  bias:  _apply_bias after FC2: cat(t + b * p for each expert's rows t, its bias b, its routing probabilities p).
The forward and the backward of each are timed under torch.profiler (eager_passes_check.py's method): the CUDA kernels
launched and the sum of their times, turned into bytes per element at the bandwidth of a plain pass over the same
rows (torch.neg), per element of the activation's output (clamp) and of FC2's output (bias).

Asserted: the kernels each pass launches, as the header's decomposition counts them (under PyTorch 2.11, the device
machines' version), and, at the default shape (gpt-oss-120b's, where the price was measured), each pass's measured
bytes per element within [0.8, 1.25] of the price. Reported at every shape: the measured bytes against the bytes the
kernels move (the clamps run at half a copy's bandwidth; the bias's small kernels add a few microseconds each).
Usage (device): python3 tests/gpu/megatron_expert_eager_check.py [--experts 16] [--rows-per-expert 1024]
                [--hidden 2880] [--ffn 2880] [--out FILE]
"""
import argparse, json, os, sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from eager_passes_check import copy_bytes_per_us, finish, kernels  # noqa: E402

# (forward, backward) bytes per element, strategies/megatron_expert_passes.hpp: what the kernels move, and the price
# (a plain pass's bytes in the time they took on an H200 at the default shape, 2026-12-04)
COUNTED = {"clamp": (16, 30), "bias": (12, 16)}
PRICED = {"clamp": (32, 66), "bias": (21, 47)}
KERNELS = {"clamp": (3, 9), "bias": (lambda e: 2 * e + 1, lambda e: 4 * e + 2)}
CLAMP = 7.0
LOW, HIGH = 0.8, 1.25


def clamp_case(experts, rows, hidden, ffn):
    y = torch.randn(experts * rows, 2 * ffn, device="cuda", dtype=torch.bfloat16, requires_grad=True)

    def fn(y):
        x_glu, x_linear = y.chunk(2, -1)
        return torch.cat((x_glu.clamp(min=None, max=CLAMP), x_linear.clamp(min=-CLAMP, max=CLAMP)), -1)

    return fn, [y], experts * rows * ffn


def bias_case(experts, rows, hidden, ffn):
    dev, bf = "cuda", torch.bfloat16
    t = torch.randn(experts * rows, hidden, device=dev, dtype=bf, requires_grad=True)
    biases = [torch.randn(hidden, device=dev, dtype=bf, requires_grad=True) for _ in range(experts)]
    probs = torch.rand(experts * rows, 1, device=dev, dtype=bf, requires_grad=True)
    split = [rows] * experts

    def fn(t, probs, *biases):
        parts = zip(torch.split(t, split), biases, torch.split(probs, split))
        return torch.cat([x + b * p for x, b, p in parts]).to(t.dtype)

    return fn, [t, probs, *biases], experts * rows * hidden


def measure(fn, inputs, repeats=5):
    out = fn(*inputs)  # warm-up
    out.backward(torch.randn_like(out))
    best = {}
    for _ in range(repeats):
        for x in inputs:
            x.grad = None
        result = {}
        result["forward"] = kernels(lambda: result.__setitem__("out", fn(*inputs)))
        grad = torch.randn_like(result["out"])
        result["backward"] = kernels(lambda: result["out"].backward(grad))
        for phase in ("forward", "backward"):
            if phase not in best or result[phase][1] < best[phase][1]:
                best[phase] = result[phase]
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--experts", type=int, default=16)
    ap.add_argument("--rows-per-expert", type=int, default=1024)
    ap.add_argument("--hidden", type=int, default=2880)
    ap.add_argument("--ffn", type=int, default=2880)
    ap.add_argument("--out", default=None, help="write the results as JSON lines here")
    args = ap.parse_args()
    torch.manual_seed(0)
    shape = (args.experts, args.rows_per_expert, args.hidden, args.ffn)
    default_shape = shape == (16, 1024, 2880, 2880)
    bandwidth = copy_bytes_per_us(args.experts * args.rows_per_expert, args.hidden)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}: a copy at {bandwidth / 1e3:.0f} GB/s; "
          f"{args.experts} experts x {args.rows_per_expert} rows, hidden {args.hidden}, ffn {args.ffn}")
    failures, lines = [], []
    for name, make in (("clamp", clamp_case), ("bias", bias_case)):
        fn, inputs, elements = make(*shape)
        best = measure(fn, inputs)
        for i, phase in enumerate(("forward", "backward")):
            n, us = best[phase]
            effective = us * bandwidth / elements
            ratio = effective / COUNTED[name][i]
            line = {"piece": name, "phase": phase, "kernels": n, "us": round(us, 1),
                    "effective_bytes_per_element": round(effective, 2), "counted": COUNTED[name][i],
                    "priced": PRICED[name][i], "to_counted": round(ratio, 3),
                    "to_priced": round(effective / PRICED[name][i], 3)}
            lines.append(line)
            print(json.dumps(line))
            expected = KERNELS[name][i]
            expected = expected(args.experts) if callable(expected) else expected
            if n != expected:
                failures.append(f"{name} {phase}: {n} kernels launched, {expected} in the decomposition counted")
            if default_shape and not LOW <= effective / PRICED[name][i] <= HIGH:
                failures.append(f"{name} {phase}: {effective:.1f} bytes an element measured, {PRICED[name][i]} "
                                f"priced (outside [{LOW}, {HIGH}] of it)")
    return finish("megatron_expert_eager_check", lines, failures, args.out)


if __name__ == "__main__":
    sys.exit(main())
