"""What full recompute costs in eager PyTorch, measured per transformer block, against a plain forward.

Why: in LLM Foundry's published benchmark tables (tests/validation/published.json, groups llmfoundry-mpt-*), the runs
with activation checkpointing reach a higher hardware FLOP utilisation than those without (A100: 63-74% HFU against
39-64%; H100: 54-58% against 37-46%), and twin predicts the checkpointed runs 7 points slower relative to the others
in both tables (docs/VALIDATION.md "Where the held-out error lives"). If eager PyTorch's recomputed forward (under
torch.utils.checkpoint, non-reentrant, as Composer wraps each block) cost less than a forward, twin's pricing of it as
a forward would be the mechanism. This script measures it.

The block is LLM Foundry's MPT benchmark block as its published parameter counts describe it (biased linears, LayerNorm
with bias, GeLU MLP of 4x, causal attention through SDPA's flash kernel, residual adds; dropout 0), bf16 parameters
(FSDP's PURE mode). For each micro-batch, each run back to back (CUDA events around the repetitions, no
synchronisation between them, as in a training loop): a forward recording autograd (F), a plain step (forward and
backward) and a checkpointed step (the forward under checkpoint, which keeps nothing, then the backward, which
recomputes the block first). Recompute share = (checkpointed step - plain step) / F.

Asserted: the gradients under checkpoint equal the plain ones within bf16 tolerance (the two runs compute the same
thing), and every time is positive. Reported, not asserted: the shares (a finding, not a property to hold).
PyTorch's non-reentrant checkpoint stops recomputing once the tensors the backward needs are made again (its
default since 2.1, set_checkpoint_early_stop); --no-early-stop recomputes the whole block, as a reentrant checkpoint
and Megatron's full recompute do.
Usage (device): python3 tests/gpu/recompute_cost_pytorch.py [--hidden 4096] [--seq 2048] [--mbs 2 6 18]
                [--no-early-stop] [--out F.json]
"""
import argparse, contextlib, json, sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


class MptBlock(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.norm_1 = nn.LayerNorm(hidden)
        self.wqkv = nn.Linear(hidden, 3 * hidden)
        self.out_proj = nn.Linear(hidden, hidden)
        self.norm_2 = nn.LayerNorm(hidden)
        self.up_proj = nn.Linear(hidden, 4 * hidden)
        self.down_proj = nn.Linear(4 * hidden, hidden)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.wqkv(self.norm_1(x)).view(b, s, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out_proj(a.transpose(1, 2).reshape(b, s, h))
        return x + self.down_proj(F.gelu(self.up_proj(self.norm_2(x)), approximate="none"))


def loop_ms(fn, repetitions):
    """Milliseconds per call of fn, run back to back (no synchronisation between calls, so the GPU never idles and
    its clock does not ramp down between them), after three calls to warm up."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repetitions):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / repetitions


def kernel_table(fn):
    """{kernel name: (launches, total ms)} of one call of fn (after a warm-up call), by torch.profiler."""
    fn()
    torch.cuda.synchronize()
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    table = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and e.device_time_total > 0:
            n, ms = table.get(e.name, (0, 0.0))
            table[e.name] = (n + 1, ms + e.device_time_total / 1e3)
    return table


def print_kernel_difference(block, mbs, seq, hidden):
    """Per kernel name: launches and time in a forward, a plain step and a checkpointed step; the recompute is what
    the checkpointed step runs beyond the plain one."""
    x = torch.randn(mbs, seq, hidden, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    grad = torch.randn_like(x)

    def step(checkpointed):
        y = checkpoint(block, x, use_reentrant=False) if checkpointed else block(x)
        y.backward(grad)
        block.zero_grad(set_to_none=True)
        x.grad = None

    forward = kernel_table(lambda: block(x))
    plain = kernel_table(lambda: step(False))
    checkpointed = kernel_table(lambda: step(True))
    print(f"kernels at micro-batch {mbs}: name | forward n, ms | plain step n, ms | checkpointed step n, ms")
    for name in sorted(set(forward) | set(plain) | set(checkpointed),
                       key=lambda k: -checkpointed.get(k, (0, 0.0))[1]):
        f, p, c = forward.get(name, (0, 0.0)), plain.get(name, (0, 0.0)), checkpointed.get(name, (0, 0.0))
        print(f"  {name[:90]:90s} | {f[0]:3d} {f[1]:8.3f} | {p[0]:3d} {p[1]:8.3f} | {c[0]:3d} {c[1]:8.3f}")
    totals = [sum(ms for _, ms in t.values()) for t in (forward, plain, checkpointed)]
    print(f"  total kernel ms: forward {totals[0]:.3f}, plain step {totals[1]:.3f}, checkpointed step {totals[2]:.3f}:"
          f" recompute = {(totals[2] - totals[1]) / totals[0]:.3f} of a forward's kernels")


def measure(block, mbs, seq, hidden, repetitions):
    """Per call: a forward recording autograd (F), a plain step (F + backward) and a checkpointed step (F without
    saving + recompute + backward), each run back to back; gradients of one step of each kept for the comparison."""
    x = torch.randn(mbs, seq, hidden, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    grad = torch.randn_like(x)

    def forward():
        block(x)

    def step(checkpointed):
        def run():
            y = checkpoint(block, x, use_reentrant=False) if checkpointed else block(x)
            y.backward(grad)
            block.zero_grad(set_to_none=True)
            x.grad = None
        return run

    def gradients(checkpointed):
        y = checkpoint(block, x, use_reentrant=False) if checkpointed else block(x)
        y.backward(grad)
        g = [p.grad.float().clone() for p in block.parameters()] + [x.grad.float().clone()]
        block.zero_grad(set_to_none=True)
        x.grad = None
        return g

    return {"forward_ms": loop_ms(forward, repetitions), "plain_step_ms": loop_ms(step(False), repetitions),
            "checkpointed_step_ms": loop_ms(step(True), repetitions),
            "plain_grads": gradients(False), "checkpointed_grads": gradients(True)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--mbs", type=int, nargs="+", default=[2, 6, 18])
    parser.add_argument("--repetitions", type=int, default=15)
    parser.add_argument("--no-early-stop", action="store_true",
                        help="recompute the whole block (torch.utils.checkpoint.set_checkpoint_early_stop(False))")
    parser.add_argument("--kernels", type=int, default=0, help="also list the kernels of each pass at this micro-batch")
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    # set_checkpoint_early_stop is a context manager: called bare it changes nothing
    with torch.utils.checkpoint.set_checkpoint_early_stop(False) if args.no_early_stop else contextlib.nullcontext():
        run(args)


def run(args):
    torch.manual_seed(0)
    block = MptBlock(args.hidden, args.heads).cuda().to(torch.bfloat16)
    rows, failures = [], []
    for mbs in args.mbs:
        r = measure(block, mbs, args.seq, args.hidden, args.repetitions)
        for a, b in zip(r["plain_grads"], r["checkpointed_grads"]):  # one computation twice: bf16 rounding apart
            scale = a.abs().max().item() + 1e-6
            if (a - b).abs().max().item() > 2e-2 * scale:
                failures.append(f"mbs {mbs}: a gradient under checkpoint differs by {(a - b).abs().max().item():.3g}"
                                f" (scale {scale:.3g})")
        times = [r["forward_ms"], r["plain_step_ms"], r["checkpointed_step_ms"]]
        if min(times) <= 0:
            failures.append(f"mbs {mbs}: a non-positive time {times}")
        share = (r["checkpointed_step_ms"] - r["plain_step_ms"]) / r["forward_ms"]
        rows.append({"micro_batch": mbs, "forward_ms": r["forward_ms"], "plain_step_ms": r["plain_step_ms"],
                     "checkpointed_step_ms": r["checkpointed_step_ms"], "recompute_share_of_forward": share,
                     "step_ratio_checkpointed_over_plain": r["checkpointed_step_ms"] / r["plain_step_ms"]})
        print(f"mbs {mbs:3d}: forward {r['forward_ms']:.3f} ms, step {r['plain_step_ms']:.3f} ms, checkpointed step "
              f"{r['checkpointed_step_ms']:.3f} ms: recompute = {share:.3f} of a forward, step ratio "
              f"{rows[-1]['step_ratio_checkpointed_over_plain']:.3f}", flush=True)
    if args.kernels:
        print_kernel_difference(block, args.kernels, args.seq, args.hidden)
    report = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "hidden": args.hidden,
              "early_stop": not args.no_early_stop,
              "heads": args.heads, "seq": args.seq, "rows": rows, "failures": failures}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    for failure in failures:
        print("FAIL:", failure)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
