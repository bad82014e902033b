"""FP8 over two GPUs (tests/gpu/fp8_tp_device.sh): per plan the measured and predicted step; the FP8 speed-ups over
their BF16 twins measured beside predicted; and the loss checks, each the mean of the last ten steps:
  fp8-tp2 against fp8-tp1 (the same model, data and initial weights; TP 2 quantizes each weight shard, the
    row-parallel inputs and the column-parallel output gradients with their own scales): within 1%;
  each FP8 plan against its BF16 twin: within 1% (the FP8-against-BF16 tolerance of fp8_summary.py);
  each plan with sequence parallelism against the same plan without (fp8-tp2-sp against fp8-tp2: every shard cast
    with the whole tensor's scale, so the gathered FP8 bytes are those TP 2 without SP casts): within 1%;
  every plan's loss down: the last ten steps' mean below the first step's.
Exits 1 when a plan did not run or a check fails.
    python3 fp8_tp_summary.py OUT   (OUT/run-NAME/metrics.json)"""
import json
import os
import sys

TOLERANCE = 0.01
# The plans the device script ran (its FP8_PLANS; every plan without it).
PLANS = os.environ.get("FP8_PLANS", "").split() or [
    "fp8-tp1", "bf16-tp2", "fp8-tp2", "delayed-tp2", "bf16-dp2", "delayed-dp2", "blockwise-tp2", "bf16-tp2-sp",
    "fp8-tp2-sp", "delayed-tp2-sp"]
PAIRS = [("fp8-tp2", "fp8-tp1"), ("fp8-tp2", "bf16-tp2"), ("delayed-tp2", "bf16-tp2"),
         ("delayed-dp2", "bf16-dp2"), ("blockwise-tp2", "bf16-tp2"), ("fp8-tp2-sp", "bf16-tp2-sp"),
         ("delayed-tp2-sp", "bf16-tp2-sp"), ("fp8-tp2-sp", "fp8-tp2"), ("delayed-tp2-sp", "delayed-tp2")]

out = sys.argv[1]
metrics = {}
for name in PLANS:
    path = os.path.join(out, f"run-{name}", "metrics.json")
    if os.path.exists(path):
        metrics[name] = json.load(open(path))
ok = len(metrics) == len(PLANS)
for name in PLANS:
    if name not in metrics:
        print(f"{name}: did not run")


def tail(m):
    losses = [s["loss"] for s in m["steps"]]
    return sum(losses[-10:]) / len(losses[-10:])


print("| plan | measured step s | predicted step s | error | first loss | mean of last 10 | down |")
print("|---|---|---|---|---|---|---|")
for name, m in metrics.items():
    ms, ps = m["measured"]["iteration_s"], m["predicted"]["iteration_time_s"]
    down = tail(m) < m["steps"][0]["loss"]
    ok = ok and down
    print(f"| {name} | {ms:.4f} | {ps:.4f} | {100 * (ms / ps - 1):+.2f}% | {m['steps'][0]['loss']:.4f} | "
          f"{tail(m):.4f} | {'yes' if down else 'NO'} |")
print()
for a, b in PAIRS:
    if a not in metrics or b not in metrics:
        continue
    ma, mb = metrics[a], metrics[b]
    within = abs(tail(ma) / tail(mb) - 1) <= TOLERANCE
    ok = ok and within
    la, lb = [s["loss"] for s in ma["steps"]], [s["loss"] for s in mb["steps"]]
    largest = max(abs(x - y) / y for x, y in zip(la, lb))
    line = (f"{a} against {b}: loss, mean of the last 10 steps, {100 * (tail(ma) / tail(mb) - 1):+.2f}% "
            f"({'within' if within else 'OUTSIDE'} {100 * TOLERANCE:.0f}%), largest per-step difference "
            f"{100 * largest:.2f}% over {min(len(la), len(lb))} steps")
    if b.startswith("bf16") and a.partition("-")[2] == b.partition("-")[2]:
        measured = mb["measured"]["iteration_s"] / ma["measured"]["iteration_s"]
        predicted = mb["predicted"]["iteration_time_s"] / ma["predicted"]["iteration_time_s"]
        line += (f"; speed-up measured {measured:.3f}x, predicted {predicted:.3f}x "
                 f"(predicted/measured {100 * (predicted / measured - 1):+.2f}%)")
    print(line)
sys.exit(0 if ok else 1)
