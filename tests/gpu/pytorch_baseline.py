"""PyTorch baseline for twin's executor: trains a Llama-2-7B-shaped model with a few layers on one GPU
(eager SDPA or torch.compile) and reports median step time, tokens/s, model TFLOP/s, MFU and peak memory
as one `RESULT {json}` line. Self-contained: torch only, no network, synthetic data.

Examples:
  python3 tests/gpu/pytorch_baseline.py --mode eager --micro-batch 1
  python3 tests/gpu/pytorch_baseline.py --mode compile --micro-batch 2 --master-fp32
  python3 tests/gpu/pytorch_baseline.py --device cpu --tiny --layers 1 --warmup 1 --iters 2   # dry run
"""
import argparse, json, math, statistics, sys, time
from dataclasses import dataclass

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    sys.exit("pytorch_baseline: PyTorch is not installed (python3 -c 'import torch' fails)")

# Dense bf16 tensor-core peaks (no sparsity), keyed by torch.cuda.get_device_name(); --peak-tflops overrides.
PEAK_BF16_TFLOPS = {
    "NVIDIA H100 80GB HBM3": 989.4,  # H100 SXM
    "NVIDIA H200": 989.4,            # same compute as H100 SXM
    "NVIDIA H100 PCIe": 756.5,
    "NVIDIA A100-SXM4-80GB": 312.0,
    "NVIDIA A100-SXM4-40GB": 312.0,
    "NVIDIA A100 80GB PCIe": 312.0,
}

@dataclass
class Config:
    layers: int = 4
    hidden: int = 4096
    ffn: int = 11008
    heads: int = 32
    kv_heads: int = 32
    head_dim: int = 128
    vocab: int = 32000
    seq: int = 4096
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0

# -----------------------------------------------------------------------------
# the model: Llama-2 (RMSNorm, RoPE, SwiGLU, untied embeddings, no biases, no dropout)

class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        # normalised in fp32 and cast back, as the Llama reference does
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return xf.type_as(x) * self.weight

def rope_tables(cfg):
    inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(0, cfg.head_dim, 2, dtype=torch.float32) / cfg.head_dim))
    angles = torch.outer(torch.arange(cfg.seq, dtype=torch.float32), inv_freq)
    angles = torch.cat((angles, angles), dim=-1)  # rotate-half layout (HF Llama), (seq, head_dim)
    return angles.cos(), angles.sin()

def apply_rope(x, cos, sin):
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos.to(x.dtype) + torch.cat((-x2, x1), dim=-1) * sin.to(x.dtype)

class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        # Q, K and V in one GEMM (as Megatron does); same FLOPs as three separate projections
        self.wqkv = nn.Linear(cfg.hidden, (cfg.heads + 2 * cfg.kv_heads) * cfg.head_dim, bias=False)
        self.wo = nn.Linear(cfg.heads * cfg.head_dim, cfg.hidden, bias=False)

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        c = self.cfg
        q, k, v = self.wqkv(x).split([c.heads * c.head_dim, c.kv_heads * c.head_dim, c.kv_heads * c.head_dim], dim=-1)
        q = q.view(B, T, c.heads, c.head_dim).transpose(1, 2)
        k = k.view(B, T, c.kv_heads, c.head_dim).transpose(1, 2)
        v = v.view(B, T, c.kv_heads, c.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=c.kv_heads != c.heads)
        return self.wo(y.transpose(1, 2).reshape(B, T, c.heads * c.head_dim))

class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.w_gate_up = nn.Linear(cfg.hidden, 2 * cfg.ffn, bias=False)  # w1 and w3 in one GEMM
        self.w_down = nn.Linear(cfg.ffn, cfg.hidden, bias=False)

    def forward(self, x):
        gate, up = self.w_gate_up(x).chunk(2, dim=-1)
        return self.w_down(F.silu(gate) * up)

class Block(nn.Module):
    # attention and mlp: the classes of the two halves (pytorch_fsdp_train.py passes tensor-parallel-friendly ones)
    def __init__(self, cfg, attention=Attention, mlp=MLP):
        super().__init__()
        self.attn_norm, self.attn = RMSNorm(cfg.hidden, cfg.norm_eps), attention(cfg)
        self.mlp_norm, self.mlp = RMSNorm(cfg.hidden, cfg.norm_eps), mlp(cfg)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.mlp(self.mlp_norm(x))

class Llama(nn.Module):
    def __init__(self, cfg, block=Block):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab, cfg.hidden)
        self.layers = nn.ModuleList(block(cfg) for _ in range(cfg.layers))
        self.norm = RMSNorm(cfg.hidden, cfg.norm_eps)
        self.output = nn.Linear(cfg.hidden, cfg.vocab, bias=False)  # untied from self.embed
        cos, sin = rope_tables(cfg)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets):
        x = self.embed(idx)
        for layer in self.layers:
            x = layer(x, self.rope_cos, self.rope_sin)
        logits = self.output(self.norm(x))
        # loss in fp32 over upcast logits; inside the model so torch.compile fuses the upcast and the loss
        return F.cross_entropy(logits.float().view(-1, self.cfg.vocab), targets.reshape(-1))

def model_flops_per_step(cfg, batch):
    # Megatron-LM's num_floating_point_operations (model FLOPs, no recompute), written out:
    #   6 * tokens * N  +  6 * L * s * (heads*head_dim) * tokens
    # N = L*(h*(heads + 2*kv_heads)*head_dim + heads*head_dim*h + 3*h*ffn) + h*V: every GEMM weight
    # (QKV, out-proj, SwiGLU's three matrices, output projection); the input embedding (a lookup) and the
    # norms are not counted. 6 = 2 (FMA) x 3 (forward, dgrad, wgrad). The attention term is QK^T and AV:
    # 2 GEMMs x 2 (FMA) x 3 x s x (heads*head_dim) = 12*L*s*h per token, halved for the causal mask -> 6.
    c = cfg
    attn_width = c.heads * c.head_dim
    n_gemm = c.layers * (c.hidden * (c.heads + 2 * c.kv_heads) * c.head_dim + attn_width * c.hidden
                         + 3 * c.hidden * c.ffn) + c.hidden * c.vocab
    tokens = batch * c.seq
    return 6 * tokens * n_gemm + 6 * c.layers * c.seq * attn_width * tokens, n_gemm

FLOPS_FORMULA = "6*tokens*N_gemm + 6*L*s*(heads*head_dim)*tokens (Megatron model FLOPs, causal-halved attention)"

# -----------------------------------------------------------------------------
# data: each next token is (a*prev + b) mod data_vocab with probability 0.9, else uniform over the first
# data_vocab ids. The model keeps its full 32000-way embedding and output (FLOPs unchanged); a small data_vocab
# lets 25 steps at lr 3e-4 show learning (with all 32000 ids each bigram would be seen ~3 times in 25 steps).

def make_batches(count, batch, seq, data_vocab, seed, a=1103, b=12345, p_follow=0.9):
    gen = torch.Generator().manual_seed(seed)
    shape = (count * batch, seq + 1)
    fresh = torch.randint(0, data_vocab, shape, generator=gen).tolist()
    follow = (torch.rand(shape, generator=gen) < p_follow).tolist()
    rows = []
    for fresh_row, follow_row in zip(fresh, follow):
        row = [fresh_row[0]]
        for t in range(1, seq + 1):
            row.append((a * row[-1] + b) % data_vocab if follow_row[t] else fresh_row[t])
        rows.append(row)
    return torch.tensor(rows, dtype=torch.long).view(count, batch, seq + 1)  # inputs [:-1], targets [1:]

# -----------------------------------------------------------------------------

def clock_mark(cuda):
    # CUDA events time the GPU's work of a step with no sync inside it; perf_counter serves the CPU dry run
    if not cuda:
        return time.perf_counter()
    event = torch.cuda.Event(enable_timing=True)
    event.record()
    return event

def clock_seconds(start, end):
    if isinstance(start, float):
        return end - start
    end.synchronize()
    return start.elapsed_time(end) / 1e3

def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=["eager", "compile"], default="eager",
                   help="eager: SDPA(is_causal=True) in eager mode; compile: torch.compile(model), default mode")
    p.add_argument("--micro-batch", type=int, default=1, help="sequences per step (pytorch_baseline.sh runs 1 and 2)")
    p.add_argument("--layers", type=int, default=4, help="transformer layers (Llama-2-7B has 32)")
    p.add_argument("--kv-heads", type=int, default=32, help="key/value heads (32 = MHA as Llama-2-7B; fewer = GQA)")
    p.add_argument("--seq", type=int, default=4096, help="sequence length")
    p.add_argument("--master-fp32", action="store_true",
                   help="fp32 parameters, grads and AdamW state with autocast bf16 (twin's fp32-master recipe); "
                        "default: bf16 parameters, grads and AdamW state")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first (compilation happens in step 1)")
    p.add_argument("--iters", type=int, default=20, help="timed steps after warm-up")
    p.add_argument("--log-every", type=int, default=5, help="print the loss every this many steps")
    p.add_argument("--peak-tflops", type=float, default=None,
                   help="dense bf16 peak for MFU; default from a table keyed by torch.cuda.get_device_name() "
                        f"({', '.join(f'{k}: {v}' for k, v in PEAK_BF16_TFLOPS.items())})")
    p.add_argument("--data-vocab", type=int, default=1024,
                   help="token ids 0..N-1 appear in the synthetic data (the model's vocab stays 32000)")
    p.add_argument("--seed", type=int, default=1234, help="seed of the parameter init and of the data generator")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                   help="cpu only for a dry run of the script (with --tiny); timings then mean nothing")
    p.add_argument("--tiny", action="store_true",
                   help="dry-run shape: hidden 64, ffn 172, 4 heads (kv heads capped at 4), head dim 16, vocab 512, seq 128")
    return p.parse_args()

def main():
    args = parse_args()
    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        sys.exit("pytorch_baseline: no CUDA GPU visible to PyTorch (torch.cuda.is_available() is False); "
                 "this baseline needs one GPU (use --device cpu --tiny only for a dry run)")
    cfg = Config(layers=args.layers, kv_heads=args.kv_heads, seq=args.seq)
    if args.tiny:
        cfg = Config(layers=args.layers, hidden=64, ffn=172, heads=4, kv_heads=min(args.kv_heads, 4),
                     head_dim=16, vocab=512, seq=min(args.seq, 128))
    if args.warmup < 1 or args.iters < 1:
        sys.exit("pytorch_baseline: --warmup and --iters must be at least 1 (step 1 is never timed)")
    if cfg.heads % cfg.kv_heads:
        sys.exit(f"pytorch_baseline: --kv-heads {cfg.kv_heads} must divide the {cfg.heads} query heads")

    recipe = ("fp32-master: fp32 parameters, grads and AdamW state; autocast bf16 (matmul and attention inputs/outputs "
              "bf16, residual stream fp32)"
              if args.master_fp32 else "bf16: bf16 parameters, grads, AdamW state and activations")
    recipe += ("; fp32 softmax inside SDPA; RMSNorm in fp32; fp32 cross-entropy over upcast logits; "
               "AdamW(fused, lr 3e-4, betas (0.9, 0.95), wd 0.1); grad-norm clip 1.0")
    device_name = torch.cuda.get_device_name() if cuda else "cpu"
    print(f"device: {device_name} | torch {torch.__version__} | mode {args.mode} | micro-batch {args.micro_batch}")
    print(f"model: {cfg}")
    print(f"recipe: {recipe}")

    torch.manual_seed(args.seed)
    with torch.device(args.device):
        model = Llama(cfg)
    if not args.master_fp32:
        model = model.to(torch.bfloat16)
    n_params = sum(p.numel() for p in model.parameters())
    flops_per_step, n_gemm = model_flops_per_step(cfg, args.micro_batch)
    print(f"parameters: {n_params / 1e6:.1f} M (GEMM weights counted in FLOPs: {n_gemm / 1e6:.1f} M)")
    print(f"model FLOPs/step: {flops_per_step:.4e} = {FLOPS_FORMULA}")

    # weight decay on every parameter, norms and embedding included: the simplest recipe, FLOP-neutral
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    step_model = torch.compile(model) if args.mode == "compile" else model
    autocast = torch.autocast(args.device, dtype=torch.bfloat16, enabled=args.master_fp32)

    steps = args.warmup + args.iters
    batches = make_batches(steps, args.micro_batch, cfg.seq, min(args.data_vocab, cfg.vocab), args.seed)
    losses, step_s = [], []
    for step in range(steps):
        if step == args.warmup and cuda:
            torch.cuda.reset_peak_memory_stats()  # peak memory of the timed steps only
        tokens = batches[step].to(args.device)
        inputs, targets = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
        wall0, start = time.perf_counter(), clock_mark(cuda)
        with autocast:
            loss = step_model(inputs, targets)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        end = clock_mark(cuda)
        losses.append(loss.detach())
        if step == 0:
            clock_seconds(start, end)  # waits for the step to finish
            first_wall_s = time.perf_counter() - wall0
            what = "torch.compile compilation (forward and backward) included; a warm inductor cache " \
                "in /tmp shortens it" if args.mode == "compile" else "first-call initialisation included"
            print(f"step 1: {first_wall_s:.2f} s wall, {what}; excluded from timing")
        if step >= args.warmup:
            step_s.append(clock_seconds(start, end))
        if (step + 1) % args.log_every == 0 or step == 0 or step == steps - 1:
            print(f"step {step + 1:4d}/{steps} | loss {loss.item():.4f} | grad norm {grad_norm.item():.3f}")

    median_s = statistics.median(step_s)
    tokens_per_step = args.micro_batch * cfg.seq
    tflops = flops_per_step / median_s / 1e12
    peak = args.peak_tflops if args.peak_tflops is not None else PEAK_BF16_TFLOPS.get(device_name)
    if peak is None:
        print(f"no dense bf16 peak known for '{device_name}': MFU is null (give --peak-tflops)")
    peak_memory_GiB = torch.cuda.max_memory_allocated() / 2**30 if cuda else None
    print(f"median step {median_s * 1e3:.2f} ms (min {min(step_s) * 1e3:.2f}, max {max(step_s) * 1e3:.2f}, "
          f"{len(step_s)} steps) | {tokens_per_step / median_s:.0f} tokens/s | {tflops:.1f} TFLOP/s"
          + (f" | MFU {100 * tflops / peak:.1f}% of {peak} TFLOP/s" if peak else "")
          + (f" | peak memory {peak_memory_GiB:.2f} GiB" if cuda else ""))

    result = {
        "mode": args.mode, "micro_batch": args.micro_batch, "layers": cfg.layers, "seq": cfg.seq,
        "kv_heads": cfg.kv_heads, "tiny": args.tiny, "data_vocab": min(args.data_vocab, cfg.vocab),
        "recipe": "fp32-master" if args.master_fp32 else "bf16",
        "median_step_s": median_s, "tokens_per_s": tokens_per_step / median_s, "tflops": tflops,
        "mfu": tflops / peak if peak else None, "peak_tflops": peak,
        "peak_memory_GiB": peak_memory_GiB,
        "loss_first": losses[0].item(), "loss_last": losses[-1].item(),
        "first_step_s": first_wall_s,
        "compile_s": first_wall_s if args.mode == "compile" else None,
        "flops_per_step": flops_per_step, "flops_formula": FLOPS_FORMULA,
        "device": device_name, "torch": torch.__version__,
    }
    if not all(math.isfinite(r.item()) for r in losses):
        sys.exit("pytorch_baseline: loss is not finite")
    print("RESULT " + json.dumps(result))

if __name__ == "__main__":
    main()
