"""What the PyTorch kernel-timing scripts of tests/gpu share: their command line (--out, --warmup, --iters) and PyTorch
on a GPU, or the reason they are skipped (the device machines have PyTorch; a machine without it or a GPU skips)."""
import argparse


def timing_arguments(description, default_out):
    """The parsed --out, --warmup (5) and --iters (20) of a timing script."""
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=default_out)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=20)
    return p.parse_args()


def torch_on_gpu():
    """torch, or None after printing why the script is skipped."""
    try:
        import torch
    except ImportError as error:
        print(f"skipped: PyTorch is not installed ({error})")
        return None
    if not torch.cuda.is_available():
        print("skipped: no GPU")
        return None
    return torch
