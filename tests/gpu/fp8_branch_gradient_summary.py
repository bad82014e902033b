#!/usr/bin/env python3
"""Each FP8 run of tests/gpu/fp8_branch_gradient_device.sh against its BF16 twin: the first step's gradient norm
(before clipping) and the mean loss of the last ten steps, from measured/rank0.json. Exit 1 where an FP8 run's first
gradient norm is more than GRAD_BOUND from its twin's, or its last-ten loss more than LOSS_BOUND, or a run is missing.
A run OUT/NAME-fp8-full (full recompute), where present, must have NAME-fp8's losses bit for bit.
Usage: fp8_branch_gradient_summary.py OUT NAME...   (runs OUT/NAME-bf16 and OUT/NAME-fp8)"""
import os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loss_spike_table import steps_of  # noqa: E402  (a run's losses and gradient norms, measured/rank0.json)

GRAD_BOUND = 0.03   # FP8 against BF16 without dropout or post norms moves the first norm well within this
LOSS_BOUND = 0.01   # fp8_recipes_check.sh's bound on the last ten steps


def steps(out, run):
    """The run's losses and gradient norms (an empty list where none were recorded), or None."""
    found = steps_of(os.path.join(out, run))
    return None if found is None else (found["loss"], [g for g in found["grad_norm"] if g is not None])


def main(out, names):
    status = 0
    print("| model | first grad norm bf16 / fp8 (ratio) | loss, last ten, bf16 / fp8 (difference) | verdict |")
    print("|---|---|---|---|")
    for name in names:
        bf16, fp8 = steps(out, f"{name}-bf16"), steps(out, f"{name}-fp8")
        if bf16 is None or fp8 is None or not bf16[1] or not fp8[1]:
            print(f"| {name} | missing | | fail |")
            status = 1
            continue
        ratio = fp8[1][0] / bf16[1][0]
        tail_b, tail_f = sum(bf16[0][-10:]) / 10, sum(fp8[0][-10:]) / 10
        diff = tail_f / tail_b - 1
        ok = abs(ratio - 1) <= GRAD_BOUND and abs(diff) <= LOSS_BOUND
        status |= 0 if ok else 1
        print(f"| {name} | {bf16[1][0]:.4f} / {fp8[1][0]:.4f} ({ratio:.4f}) | {tail_b:.4f} / {tail_f:.4f} "
              f"({diff:+.2%}) | {'pass' if ok else 'fail'} |")
        full = steps(out, f"{name}-fp8-full")
        if full is not None:  # the same run under full recompute: its losses bit for bit
            same = full[0] == fp8[0]
            status |= 0 if same else 1
            print(f"| {name}, FP8 under full recompute | | losses {'bit for bit' if same else 'differ'} "
                  f"over {len(full[0])} steps | {'pass' if same else 'fail'} |")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
