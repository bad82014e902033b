"""Reference PyTorch training run for issue 38: a Llama-shaped model trained as torchtitan trains one (FSDP2
`fully_shard` per block, DTensor tensor parallel, SDPA on the cuDNN or flash backend, AdamW, activation
checkpointing per block, torch.compile per block or not), in plain PyTorch, not tuned to twin. It writes
its step times as one `RESULT {json}` line (and appends it to --result), and with --profile-dir one
PyTorch profiler trace per rank (Chrome JSON, record_shapes=True; gzipped with --profile-gzip) of the
steps after the timed ones, which `twin calibrate --from-trace` folds. Synthetic data, nothing fetched.

Examples (one H200; the same with --nproc-per-node 4 and --tp 2 on four GPUs):
  torchrun --standalone --nproc-per-node 1 tests/gpu/pytorch_fsdp_train.py --layers 4 --micro-batch 1
  torchrun --standalone --nproc-per-node 1 tests/gpu/pytorch_fsdp_train.py --checkpoint full \
      --profile-dir traces/ --profile-gzip
  python3 tests/gpu/pytorch_fsdp_train.py --device cpu --tiny --layers 1 --warmup 1 --iters 2   # dry run
"""
import argparse, json, math, os, statistics, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# the model's pieces, the data and the FLOP count are the baseline's: the two scripts measure the same model
from pytorch_baseline import (Block, Config, Llama, apply_rope, make_batches, model_flops_per_step, clock_mark,
                              clock_seconds, FLOPS_FORMULA, PEAK_BF16_TFLOPS)
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint
from torch.nn.attention import SDPBackend, sdpa_kernel

SDPA_BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
                 "efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}

# -----------------------------------------------------------------------------
# the model: the baseline's Llama with torchtitan's layout of the projections, separate Q, K, V and SwiGLU
# weights, so that a column-parallel split of each keeps whole heads (and whole gate/up rows) on a rank

class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.head_dim = cfg.head_dim
        self.wq = nn.Linear(cfg.hidden, cfg.heads * cfg.head_dim, bias=False)
        self.wk = nn.Linear(cfg.hidden, cfg.kv_heads * cfg.head_dim, bias=False)
        self.wv = nn.Linear(cfg.hidden, cfg.kv_heads * cfg.head_dim, bias=False)
        self.wo = nn.Linear(cfg.heads * cfg.head_dim, cfg.hidden, bias=False)

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        # -1: the heads this rank holds (all of them without TP, heads/tp under it)
        q = self.wq(x).view(B, T, -1, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(B, T, -1, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(B, T, -1, self.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=q.size(1) != k.size(1))
        return self.wo(y.transpose(1, 2).reshape(B, T, -1))

class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.w1 = nn.Linear(cfg.hidden, cfg.ffn, bias=False)  # gate
        self.w3 = nn.Linear(cfg.hidden, cfg.ffn, bias=False)  # up
        self.w2 = nn.Linear(cfg.ffn, cfg.hidden, bias=False)  # down

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))

class Checkpointed(nn.Module):
    """Full activation checkpointing of one block: only its input is kept, the block reruns in backward."""
    def __init__(self, block):
        super().__init__()
        self.block = block

    def forward(self, x, cos, sin):
        return torch.utils.checkpoint.checkpoint(self.block, x, cos, sin, use_reentrant=False)

def make_model(cfg):
    """The baseline's Llama with this file's attention and MLP (the same FLOPs and init)."""
    return Llama(cfg, block=lambda c: Block(c, attention=Attention, mlp=MLP))

# -----------------------------------------------------------------------------
# parallelism, in torchtitan's order: tensor parallel, activation checkpointing, compile, FSDP

def apply_tensor_parallel(model, tp_mesh):
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    plan = {"attn.wq": ColwiseParallel(), "attn.wk": ColwiseParallel(), "attn.wv": ColwiseParallel(),
            "attn.wo": RowwiseParallel(), "mlp.w1": ColwiseParallel(), "mlp.w3": ColwiseParallel(),
            "mlp.w2": RowwiseParallel()}
    for block in model.layers:
        parallelize_module(block, tp_mesh, plan)

def apply_fsdp(model, dp_mesh):
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    # fp32 parameters and gradient reduction, bf16 compute: torchtitan's default mixed-precision policy
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for i, block in enumerate(model.layers):
        # the last block's parameters are needed again at once by the backward: keep them gathered
        fully_shard(block, mesh=dp_mesh, mp_policy=policy, reshard_after_forward=i < len(model.layers) - 1)
    fully_shard(model, mesh=dp_mesh, mp_policy=policy)

def parallelize(model, args, mesh):
    if args.tp > 1:
        apply_tensor_parallel(model, mesh["tp"])
    for i, block in enumerate(model.layers):
        if args.checkpoint == "full":
            block = Checkpointed(block)
        if args.compile:
            block.compile(fullgraph=True)  # in place: fully_shard then wraps the module itself
        model.layers[i] = block
    if not args.no_fsdp:
        apply_fsdp(model, mesh["dp"])

@torch.no_grad()
def grad_sum_of_squares(params):
    """Sum of squared gradient elements over the whole model, each element once, for any mix of DTensor meshes:
    a rank's local shard is held by world/shards ranks, so each rank adds its shard's share and all ranks sum."""
    from torch.distributed.tensor import DTensor, Shard
    world = dist.get_world_size() if dist.is_initialized() else 1
    locals_by_copies = {}
    for p in params:
        if p.grad is None:
            continue
        g, shards = p.grad, 1
        if isinstance(g, DTensor):
            shards = math.prod(g.device_mesh.size(d) for d, pl in enumerate(g.placements) if isinstance(pl, Shard))
            g = g.to_local()
        locals_by_copies.setdefault(world // shards, []).append(g)
    local_grads = [g for grads in locals_by_copies.values() for g in grads]
    total = torch.zeros((), device=local_grads[0].device)
    for copies, grads in sorted(locals_by_copies.items()):
        norms = torch._foreach_norm(grads, 2.0)
        total = total + torch.stack(norms).float().pow(2).sum() / copies
    if world > 1:
        dist.all_reduce(total)
    return total, local_grads

@torch.no_grad()
def clip_grad_norm(params, max_norm):
    total_sq, local_grads = grad_sum_of_squares(params)
    norm = total_sq.sqrt()
    torch._foreach_mul_(local_grads, torch.clamp(max_norm / (norm + 1e-6), max=1.0))
    return norm

# -----------------------------------------------------------------------------

def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layers", type=int, default=4, help="transformer layers (Llama-2-7B widths; it has 32)")
    p.add_argument("--kv-heads", type=int, default=32, help="key/value heads (32 = MHA as Llama-2-7B)")
    p.add_argument("--seq", type=int, default=4096, help="sequence length")
    p.add_argument("--micro-batch", type=int, default=1, help="sequences per rank and step (no accumulation)")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel size; the data-parallel (FSDP) size "
                   "is the world size over it")
    p.add_argument("--checkpoint", choices=["none", "full"], default="none",
                   help="activation checkpointing of every block (full: the block reruns in backward)")
    p.add_argument("--compile", action="store_true", help="torch.compile each block (fullgraph)")
    p.add_argument("--sdpa", choices=sorted(SDPA_BACKENDS) + ["auto"], default="cudnn",
                   help="the only SDPA backend allowed (auto: PyTorch's own choice)")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first (compilation happens in step 1)")
    p.add_argument("--iters", type=int, default=10, help="timed steps, no profiler")
    p.add_argument("--profile-dir", default=None, help="after the timed steps, profile one warm-up and "
                   "--profile-steps steps and write <dir>/<name>_rank<R>.json[.gz] per rank")
    p.add_argument("--profile-steps", type=int, default=3, help="steps the profiler records")
    p.add_argument("--profile-gzip", action="store_true", help="gzip the trace")
    p.add_argument("--name", default=None, help="name of this run in the result and trace file names")
    p.add_argument("--result", default=None, help="append the RESULT json line to this file (rank 0)")
    p.add_argument("--peak-tflops", type=float, default=None, help="dense bf16 peak for MFU")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cpu: dry run with --tiny, gloo")
    p.add_argument("--tiny", action="store_true", help="dry-run shape (hidden 64, 4 heads, vocab 512, seq 128)")
    p.add_argument("--no-fsdp", action="store_true", help="no fully_shard (only with one data-parallel rank): "
                   "fp32 parameters and compute; a check of what FSDP adds to the arithmetic")
    return p.parse_args()

def run_name(args):
    return args.name or (f"L{args.layers}_mb{args.micro_batch}_tp{args.tp}_ckpt-{args.checkpoint}"
                         f"{'_compile' if args.compile else ''}_{args.sdpa}")

def setup_distributed(args):
    """torchrun sets RANK, WORLD_SIZE and the rendezvous; a plain `python3` run is a world of one."""
    for key, value in (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1"), ("MASTER_ADDR", "127.0.0.1"),
                       ("MASTER_PORT", "29517")):
        os.environ.setdefault(key, value)
    cuda = args.device == "cuda"
    if cuda:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl" if cuda else "gloo")
    world = dist.get_world_size()
    if world % args.tp:
        sys.exit(f"pytorch_fsdp_train: --tp {args.tp} does not divide the world size {world}")
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh(args.device, (world // args.tp, args.tp), mesh_dim_names=("dp", "tp"))
    return mesh, dist.get_rank(), world

def make_profiler(args, rank):
    if not args.profile_dir:
        return None
    from torch.profiler import ProfilerActivity, profile, schedule
    os.makedirs(args.profile_dir, exist_ok=True)
    path = os.path.join(args.profile_dir, f"{run_name(args)}_rank{rank}.json" + (".gz" if args.profile_gzip else ""))
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device == "cuda" else [])
    return profile(activities=activities, record_shapes=True,
                   schedule=schedule(wait=0, warmup=1, active=args.profile_steps, repeat=1),
                   on_trace_ready=lambda prof: prof.export_chrome_trace(path))

def train_step(model, optimizer, batch, args):
    inputs, targets = batch[:, :-1].contiguous(), batch[:, 1:].contiguous()
    loss = model(inputs, targets)
    loss.backward()
    grad_norm = clip_grad_norm(list(model.parameters()), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach(), grad_norm

def main():
    args = parse_args()
    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        sys.exit("pytorch_fsdp_train: no CUDA GPU visible (use --device cpu --tiny for a dry run)")
    if args.warmup < 1 or args.iters < 1 or args.profile_steps < 1:
        sys.exit("pytorch_fsdp_train: --warmup, --iters and --profile-steps must be at least 1")
    cfg = Config(layers=args.layers, kv_heads=args.kv_heads, seq=args.seq)
    if args.tiny:
        cfg = Config(layers=args.layers, hidden=64, ffn=172, heads=4, kv_heads=min(args.kv_heads, 4),
                     head_dim=16, vocab=512, seq=min(args.seq, 128))
    if cfg.heads % args.tp or cfg.kv_heads % args.tp or cfg.ffn % args.tp:
        sys.exit(f"pytorch_fsdp_train: --tp {args.tp} must divide the heads, kv heads and FFN width")
    mesh, rank, world = setup_distributed(args)
    if args.no_fsdp and world != args.tp:
        sys.exit("pytorch_fsdp_train: --no-fsdp needs one data-parallel rank (--tp equal to the world size)")
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    dp_rank = mesh["dp"].get_local_rank()
    log = print if rank == 0 else (lambda *a, **k: None)
    device_name = torch.cuda.get_device_name() if cuda else "cpu"
    log(f"device: {device_name} x{world} | torch {torch.__version__} | {run_name(args)} | dp {world // args.tp}")

    torch.manual_seed(args.seed)
    with torch.device(device):
        model = make_model(cfg)  # fp32 parameters: FSDP's policy casts them to bf16 for compute
    parallelize(model, args, mesh)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=cuda)
    profiler = make_profiler(args, rank)
    steps = args.warmup + args.iters + (1 + args.profile_steps if profiler else 0)
    # each data-parallel rank its own sequences; the ranks of one TP group the same ones
    batches = make_batches(steps, args.micro_batch, cfg.seq, min(1024, cfg.vocab), args.seed + dp_rank)
    backend = [SDPA_BACKENDS[args.sdpa]] if args.sdpa != "auto" else list(SDPA_BACKENDS.values())

    step_s, profiled_s, losses, grad_norms = [], [], [], []
    with sdpa_kernel(backend):
        for step in range(steps):
            profiling = profiler is not None and step >= args.warmup + args.iters
            if profiling and step == args.warmup + args.iters:
                profiler.start()
            start = clock_mark(cuda)
            loss, grad_norm = train_step(model, optimizer, batches[step].to(device), args)
            end = clock_mark(cuda)
            losses.append(loss)
            grad_norms.append(grad_norm)
            seconds = clock_seconds(start, end)
            if step == 0:
                log(f"step 1: {seconds:.2f} s (first call{', compilation' if args.compile else ''}); not timed")
            if profiling:
                profiled_s.append(seconds)
                profiler.step()
            elif step >= args.warmup:
                step_s.append(seconds)
            if step == 0 or step == steps - 1 or (step + 1) % 5 == 0:
                log(f"step {step + 1:3d}/{steps} | loss {loss.item():.4f} | grad norm {grad_norm.item():.3f}")
    if profiler is not None:
        profiler.stop()  # writes this rank's trace (on_trace_ready)
    report(args, cfg, world, device_name, step_s, profiled_s, losses, grad_norms, cuda)
    dist.destroy_process_group()

def report(args, cfg, world, device_name, step_s, profiled_s, losses, grad_norms, cuda):
    if dist.get_rank() != 0:
        return
    flops_per_rank_step = model_flops_per_step(cfg, args.micro_batch)[0] * (world // args.tp) / world
    median_s = statistics.median(step_s)
    peak = args.peak_tflops or PEAK_BF16_TFLOPS.get(device_name)
    tflops = flops_per_rank_step / median_s / 1e12
    result = {
        "name": run_name(args), "layers": cfg.layers, "hidden": cfg.hidden, "ffn": cfg.ffn, "heads": cfg.heads,
        "kv_heads": cfg.kv_heads, "vocab": cfg.vocab, "seq": cfg.seq, "micro_batch": args.micro_batch,
        "world": world, "tp": args.tp, "dp": world // args.tp, "checkpoint": args.checkpoint,
        "compile": args.compile, "sdpa": args.sdpa, "tiny": args.tiny,
        "recipe": "FSDP2 fp32 params, bf16 compute, fp32 reduce; AdamW fused (lr 3e-4, betas 0.9/0.95, wd 0.1); "
                  "grad-norm clip 1.0; fp32 cross-entropy; no gradient accumulation",
        "median_step_s": median_s, "step_s": step_s, "profiled_step_s": profiled_s,
        "tflops_per_gpu": tflops, "mfu": tflops / peak if peak else None, "flops_formula": FLOPS_FORMULA,
        "peak_memory_GiB": torch.cuda.max_memory_allocated() / 2**30 if cuda else None,
        "loss_first": losses[0].item(), "loss_last": losses[-1].item(), "fsdp": not args.no_fsdp,
        "losses": [l.item() for l in losses], "grad_norms": [g.item() for g in grad_norms],
        "device": device_name, "torch": torch.__version__,
    }
    if not all(math.isfinite(l.item()) for l in losses):
        sys.exit("pytorch_fsdp_train: loss is not finite")
    print(f"median step {median_s * 1e3:.2f} ms over {len(step_s)} steps | {tflops:.1f} TFLOP/s per GPU"
          + (f" | MFU {100 * tflops / peak:.1f}%" if peak else ""))
    line = "RESULT " + json.dumps(result)
    print(line)
    if args.result:
        with open(args.result, "a") as f:
            f.write(json.dumps(result) + "\n")

if __name__ == "__main__":
    main()
