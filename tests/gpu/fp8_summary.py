"""FP8 against BF16 (tests/gpu/fp8_check.sh, fp8_recipes_check.sh): per plan the measured and predicted step and peak
memory (the worst rank's), per FP8 recipe the speed-up over BF16 measured beside predicted and the loss against
BF16's. Exits 1 when a plan did not run, a peak is more than 3% from the memory model's (issue 37 item 4), or a
recipe's loss, mean of the last ten steps, is more than 1% from BF16's. Where the script simulated a plan
with other profiles (OUT/sim-VARIANT-NAME/best.json), their predictions and speed-ups are printed beside.
    python3 fp8_summary.py OUT bf16 NAME...   (OUT/run-NAME/metrics.json)"""
import json
import os
import sys

TOLERANCE = 0.01  # the loss's mean over the last ten steps, relative to BF16's
MEMORY_TOLERANCE = 0.03  # a measured peak against its prediction (issue 37's aim)

out, names = sys.argv[1], sys.argv[2:]
metrics = {}
for name in names:
    path = os.path.join(out, f"run-{name}", "metrics.json")
    if os.path.exists(path):
        metrics[name] = json.load(open(path))

def memory_error(m):
    """The worst rank's predicted allocated peak over its measured peak, less 1 (tools/memory_survey.py's measure)."""
    return max((r["predicted_allocated_peak_GiB"] / r["peak_memory_GiB"] - 1 for r in m["ranks"]), key=abs)


print("| plan | measured step s | predicted step s | error | peak GiB | predicted GiB | error | first loss | last loss |")
print("|---|---|---|---|---|---|---|---|---|")
ok = len(metrics) == len(names)
for name, m in metrics.items():
    ms, ps = m["measured"]["iteration_s"], m["predicted"]["iteration_time_s"]
    peak = max(r["peak_memory_GiB"] for r in m["ranks"])
    predicted_peak = max(r["predicted_allocated_peak_GiB"] for r in m["ranks"])
    ok = ok and abs(memory_error(m)) <= MEMORY_TOLERANCE
    print(f"| {name} | {ms:.4f} | {ps:.4f} | {100 * (ms / ps - 1):+.2f}% | {peak:.3f} | {predicted_peak:.3f} | "
          f"{100 * memory_error(m):+.2f}% | {m['steps'][0]['loss']:.4f} | {m['steps'][-1]['loss']:.4f} |")
bf16 = metrics.get("bf16")
curves = {}
for name in names[1:]:
    if bf16 is None or name not in metrics:
        continue
    m = metrics[name]
    measured = bf16["measured"]["iteration_s"] / m["measured"]["iteration_s"]
    predicted = bf16["predicted"]["iteration_time_s"] / m["predicted"]["iteration_time_s"]
    lb = [s["loss"] for s in bf16["steps"]]
    lf = [s["loss"] for s in m["steps"]]
    tail_b, tail_f = sum(lb[-10:]) / len(lb[-10:]), sum(lf[-10:]) / len(lf[-10:])
    diffs = [abs(x - y) / y for x, y in zip(lf, lb)]
    within = abs(tail_f / tail_b - 1) <= TOLERANCE
    ok = ok and within
    print(f"\n{name}: speed-up measured {measured:.3f}x, predicted {predicted:.3f}x (predicted/measured "
          f"{100 * (predicted / measured - 1):+.2f}%); loss final bf16 {lb[-1]:.4f}, {name} {lf[-1]:.4f} "
          f"({100 * (lf[-1] / lb[-1] - 1):+.2f}%), mean of the last 10 steps {100 * (tail_f / tail_b - 1):+.2f}% "
          f"({'within' if within else 'OUTSIDE'} {100 * TOLERANCE:.0f}%), largest per-step difference over "
          f"{len(diffs)} steps {100 * max(diffs):.2f}%")
    curves[name] = lf
    # Other profiles' predictions (OUT/sim-VARIANT-{bf16,NAME}/best.json), where the script made them: fp8_check.sh's
    # micro-benchmark variants, fp8_recipes_check.sh's shipped profile.
    for variant, what in (("shipped", "the shipped h200-x1 profile, nothing calibrated"),
                          ("bench-curves", "micro-benchmarks, both clock curves"),
                          ("bench-bf16-curve", "micro-benchmarks, the BF16 curve alone")):
        paths = [os.path.join(out, f"sim-{variant}-{p}", "best.json") for p in ("bf16", name)]
        if all(os.path.exists(p) for p in paths):
            pb, pf = (json.load(open(p))["predicted"]["iteration_time_s"] for p in paths)
            mb, mf = bf16["measured"]["iteration_s"], m["measured"]["iteration_s"]
            print(f"{what}: BF16 {pb:.4f} s ({100 * (mb / pb - 1):+.2f}%), {name} {pf:.4f} s "
                  f"({100 * (mf / pf - 1):+.2f}%), speed-up {pb / pf:.3f}x ({100 * (pb / pf / measured - 1):+.2f}%)")
if bf16 is not None:
    print("\nstep,loss_bf16," + ",".join(f"loss_{n}" for n in curves))
    for i, x in enumerate(bf16["steps"]):
        print(f"{i + 1},{x['loss']:.5f}," + ",".join(f"{c[i]:.5f}" if i < len(c) else "" for c in curves.values()))
sys.exit(0 if ok else 1)
