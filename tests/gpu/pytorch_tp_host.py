"""The host of DTensor tensor-parallel steps (issue 38): what pytorch_host_cost.py measured at one small width, on
every rank and at several widths and token counts, with what the GPUs wait for at each TP collective. For each
configuration (hidden width, sequence, micro-batch, TP size; pytorch_fsdp_train.py's model and parallelism, eager,
cuDNN attention):
  - unprofiled, at 2 and 6 layers, every rank's host time of forward, backward and the optimizer (perf_counter
    around each phase; the GPU synchronised only at the end of a step) and of the synchronised step, per step;
  - at 6 layers, 2 steps under the PyTorch profiler (CPU ops with shapes, CUDA kernels), one trace per rank, from
    which tools/pytorch_tp_host_analysis.py reads each op class's host time and each NCCL kernel's wait on the GPU
    against the ranks' launches (both ranks' traces share the host's clock).
A JSON line per configuration to --result; traces to --trace-dir. Stops starting configurations after --budget-s.

  torchrun --standalone --nproc-per-node 2 tests/gpu/pytorch_tp_host.py --result tp_host.jsonl --trace-dir traces
"""
import argparse, json, os, statistics, sys, time
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_fsdp_train import clip_grad_norm, make_model, parallelize
from pytorch_baseline import Config
import torch
import torch.profiler
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.nn.attention import SDPBackend, sdpa_kernel

# (hidden, ffn, heads, head_dim, vocab, seq, micro-batch, tp), most wanted first: pytorch_host_cost.py's width,
# the four-GPU study's (Llama-2-7B), then widths between at the study's sequence, then micro-batch 2, then TP 1
WIDTHS = {256: (688, 4, 64), 1024: (2752, 8, 128), 2048: (5504, 16, 128), 4096: (11008, 32, 128)}
CONFIGS = [(256, 128, 1, 2), (4096, 4096, 1, 2), (1024, 4096, 1, 2), (4096, 4096, 2, 2), (1024, 4096, 2, 2),
           (256, 4096, 1, 2), (2048, 4096, 1, 2), (256, 128, 2, 2), (2048, 4096, 2, 2), (256, 128, 1, 1),
           (4096, 4096, 1, 1)]

def config_name(hidden, seq, mb, tp):
    return f"h{hidden}_s{seq}_mb{mb}_tp{tp}"

def one_step(model, optimizer, inputs, targets):
    """Host seconds of forward, backward, the optimizer, and the step until the GPU is done."""
    torch.cuda.synchronize()
    dist.barrier()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    with torch.profiler.record_function("phase_forward"):
        loss = model(inputs, targets)
    t1 = time.perf_counter()
    with torch.profiler.record_function("phase_backward"):
        loss.backward()
    t2 = time.perf_counter()
    with torch.profiler.record_function("phase_optimizer"):
        clip_grad_norm(list(model.parameters()), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    t3 = time.perf_counter()
    torch.cuda.synchronize()
    t4 = time.perf_counter()
    return [t1 - t0, t2 - t1, t3 - t2, t4 - t0]

MESHES = {}  # one device mesh (and its NCCL communicators) per TP size

def measure(world, cfg, mb, tp, layers, args, trace_path):
    torch.manual_seed(1)
    if tp not in MESHES:
        MESHES[tp] = init_device_mesh("cuda", (world // tp, tp), mesh_dim_names=("dp", "tp"))
    mesh = MESHES[tp]
    with torch.device("cuda"):
        model = make_model(Config(layers=layers, **cfg))
    parallelize(model, SimpleNamespace(tp=tp, checkpoint="none", compile=False, no_fsdp=False), mesh)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)
    batch = torch.randint(0, cfg["vocab"], (mb, cfg["seq"] + 1), device="cuda")
    inputs, targets = batch[:, :-1].contiguous(), batch[:, 1:].contiguous()
    steps = [one_step(model, optimizer, inputs, targets) for _ in range(args.warmup + args.iters)][args.warmup:]
    profiled = []
    if trace_path:
        from torch.profiler import ProfilerActivity, profile
        one_step(model, optimizer, inputs, targets)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
            profiled = [one_step(model, optimizer, inputs, targets) for _ in range(args.profile_steps)]
        prof.export_chrome_trace(trace_path)
    del model, optimizer
    torch.cuda.empty_cache()
    return {"steps_s": steps, "profiled_steps_s": profiled}

def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--iters", type=int, default=6)
    p.add_argument("--profile-steps", type=int, default=2)
    p.add_argument("--budget-s", type=float, default=1e9, help="start no configuration after this many seconds")
    p.add_argument("--result", default=None)
    p.add_argument("--trace-dir", default=None)
    args = p.parse_args()
    begun = time.perf_counter()
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl")
    world, rank = dist.get_world_size(), dist.get_rank()
    if args.trace_dir:
        os.makedirs(args.trace_dir, exist_ok=True)
    for hidden, seq, mb, tp in CONFIGS:
        over = torch.tensor([time.perf_counter() - begun > args.budget_s], device="cuda", dtype=torch.int32)
        dist.all_reduce(over)  # every rank stops at the same configuration
        if over.item():
            break
        ffn, heads, head_dim = WIDTHS[hidden]
        cfg = dict(hidden=hidden, ffn=ffn, heads=heads, kv_heads=heads, head_dim=head_dim,
                   vocab=512 if seq <= 128 else 32000, seq=seq)
        name = config_name(hidden, seq, mb, tp)
        started = time.perf_counter()
        per_layers = {}
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):  # the study's backend
            for layers in (2, 6):
                trace = (os.path.join(args.trace_dir, f"{name}_rank{rank}.json.gz")
                         if args.trace_dir and layers == 6 else None)
                per_layers[layers] = measure(world, cfg, mb, tp, layers, args, trace)
        ranks = [None] * world
        dist.all_gather_object(ranks, per_layers)
        medians = [{L: [statistics.median(s[k] for s in r[L]["steps_s"]) * 1e3 for k in range(4)] for L in (2, 6)}
                   for r in ranks]
        row = {"name": name, "world": world, "tp": tp, "micro_batch": mb, "layers": [2, 6], **cfg,
               "phases": ["forward", "backward", "optimizer", "step"],
               "per_layer_ms": [[(m[6][k] - m[2][k]) / 4 for k in range(4)] for m in medians],  # per rank
               "median_ms": [{str(L): m[L] for L in (2, 6)} for m in medians],
               "ranks": [{str(L): r[L] for L in (2, 6)} for r in ranks],
               "torch": torch.__version__, "device": torch.cuda.get_device_name(),
               "seconds": time.perf_counter() - started}
        if rank == 0:
            print("TPHOST " + json.dumps({k: row[k] for k in ("name", "per_layer_ms", "seconds")}), flush=True)
            if args.result:
                with open(args.result, "a") as f:
                    f.write(json.dumps(row) + "\n")
    dist.destroy_process_group()

if __name__ == "__main__":
    main()
