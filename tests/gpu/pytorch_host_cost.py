"""The host's time per training step of pytorch_fsdp_train.py's model as PyTorch drives it (issue 38): the same
model, parallelism and step (FSDP2 per block, DTensor TP, checkpointing, torch.compile per block), at widths so
small (hidden 256, sequence 128) that the GPU finishes each kernel long before the host launches the next. The
host's time then is the step's: measured at 2 and 6 layers, the difference over 4 is one layer's host time per
step (forward, backward, the optimizer's share), the rest the step's fixed part. Unprofiled (perf_counter around
each phase; the GPU is synchronised only at the end of a step). One torchrun over the GPUs, every configuration
in turn; a JSON line per configuration to --result.

  torchrun --standalone --nproc-per-node 4 tests/gpu/pytorch_host_cost.py --result host_cost.jsonl
"""
import argparse, json, os, statistics, sys, time
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_fsdp_train import clip_grad_norm, make_model, parallelize
from pytorch_baseline import Config
import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.nn.attention import SDPBackend, sdpa_kernel

# (tensor parallel, checkpoint, compile): the four-GPU study's configurations (docs/accuracy/pytorch-fsdp2-4xH200)
CONFIGS = [(1, "none", False), (1, "full", False), (1, "none", True), (2, "none", False), (4, "none", False),
           (2, "full", True)]

def measure(world, tp, checkpoint, compile, layers, args):
    """Median host seconds of forward, backward and the optimizer's part, and of the whole synchronised step."""
    torch._dynamo.reset()
    cfg = Config(layers=layers, hidden=256, ffn=688, heads=4, kv_heads=4, head_dim=64, vocab=512, seq=128)
    mesh = init_device_mesh("cuda", (world // tp, tp), mesh_dim_names=("dp", "tp"))
    torch.manual_seed(1)
    with torch.device("cuda"):
        model = make_model(cfg)
    parallelize(model, SimpleNamespace(tp=tp, checkpoint=checkpoint, compile=compile), mesh)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)
    batch = torch.randint(0, cfg.vocab, (1, cfg.seq + 1), device="cuda")
    inputs, targets = batch[:, :-1].contiguous(), batch[:, 1:].contiguous()
    phases = []
    for step in range(args.warmup + args.iters):
        torch.cuda.synchronize()
        dist.barrier()
        t0 = time.perf_counter()
        loss = model(inputs, targets)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        clip_grad_norm(list(model.parameters()), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        t3 = time.perf_counter()
        torch.cuda.synchronize()
        t4 = time.perf_counter()
        if step >= args.warmup:
            phases.append((t1 - t0, t2 - t1, t3 - t2, t4 - t0))
    return [statistics.median(p[k] for p in phases) for k in range(4)]

def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--iters", type=int, default=15)
    p.add_argument("--result", default=None)
    args = p.parse_args()
    torch._dynamo.config.cache_size_limit = 64
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl")
    world, rank = dist.get_world_size(), dist.get_rank()
    for tp, checkpoint, compile in CONFIGS:
        started = time.perf_counter()
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):  # the study's backend
            few, many = [measure(world, tp, checkpoint, compile, layers, args) for layers in (2, 6)]
        per_layer = [(b - a) / 4 for a, b in zip(few, many)]
        fixed = [a - 2 * l for a, l in zip(few, per_layer)]
        row = {"world": world, "tp": tp, "checkpoint": checkpoint, "compile": compile,
               "per_layer_ms": dict(zip(("forward", "backward", "optimizer", "step"), [x * 1e3 for x in per_layer])),
               "fixed_ms": dict(zip(("forward", "backward", "optimizer", "step"), [x * 1e3 for x in fixed])),
               "layers2_ms": [x * 1e3 for x in few], "layers6_ms": [x * 1e3 for x in many],
               "torch": torch.__version__, "device": torch.cuda.get_device_name(),
               "seconds": time.perf_counter() - started}
        if rank == 0:
            print("HOST " + json.dumps(row), flush=True)
            if args.result:
                with open(args.result, "a") as f:
                    f.write(json.dumps(row) + "\n")
    dist.destroy_process_group()

if __name__ == "__main__":
    main()
