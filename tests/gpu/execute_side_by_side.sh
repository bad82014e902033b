#!/usr/bin/env bash
# Issue 4's speed check in one device call on one GPU: the kernel tests, then twin execute on the
# Llama-2-7B-shaped model (4 layers, seq 4096, micro-batch 1 and 2) and PyTorch (eager with SDPA, and
# torch.compile) on the same GPU with both precision recipes: bf16 parameters with fused AdamW, and fp32
# master weights (twin's default; twin also runs bf16 moments and bf16 parameters without a master copy,
# training.optimizer_precision). Tables: $OUT/twin_speed.md, $OUT/pytorch_baseline.jsonl, $OUT/summary.md.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-out/side-by-side}"
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
twin="${TWIN:-build-carry/twin}"
test_gpu="${TEST_GPU:-build-carry/test_gpu}"
[ -d build-carry/lib ] && export LD_LIBRARY_PATH="$PWD/build-carry/lib:${LD_LIBRARY_PATH:-}"
status=0
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader

echo "=== kernel tests ($(date -u +%H:%M:%S))"
# The parameterised suites are named Shapes/KernelNorm... and the like: match anywhere in the name.
"$test_gpu" --gtest_filter='*Kernel*:*Attention*:*Matmul*' > "$OUT/kernel_tests.log" 2>&1 || status=1
grep -E "kernel-speed\] attention|determinism" "$OUT/kernel_tests.log"
tail -3 "$OUT/kernel_tests.log"

echo "=== twin execute ($(date -u +%H:%M:%S))"
python3 tests/gpu/execute_check.py --twin "$twin" --out /tmp/twin-speed --gpus 1 --only speed --iters 15 || status=1
cp /tmp/twin-speed/execute_check.md "$OUT/twin_speed.md"
for run in /tmp/twin-speed/7b4l-*; do
  cp "$run/metrics.json" "$OUT/$(basename "$run").metrics.json"; cp "$run/ops.csv" "$OUT/$(basename "$run").ops.csv"
done

for recipe in "" "--master-fp32"; do
  echo "=== PyTorch ${recipe:-bf16 parameters} ($(date -u +%H:%M:%S))"
  OUT="/tmp/pytorch" bash tests/gpu/pytorch_baseline.sh --warmup 4 --iters 12 $recipe > /dev/null 2>&1 || status=1
done
cp /tmp/pytorch/pytorch_baseline.jsonl "$OUT/" 2>/dev/null
python3 - "$OUT" <<'PY'
import json, sys, glob, os
out = sys.argv[1]
rows = ["| run | micro-batch | recipe | step s | tokens/s | MFU |", "|---|---|---|---|---|---|"]
for f in sorted(glob.glob(os.path.join(out, "7b4l-mbs*.metrics.json"))):
    m = json.load(open(f)); s = m["measured"]
    mbs = 1 if "mbs1" in f else 2
    recipe = ("bf16 parameters (no master), bf16 moments" if "bf16-state" in f else
              "fp32 master, bf16 moments" if "bf16-moments" in f else "fp32 master")
    if "deterministic-attention" in f:
        recipe += " (cuDNN attention, deterministic backward)"
    if "residual-fusion" in f:
        recipe += ", residual fusion"
    peak = max(r["peak_memory_GiB"] for r in m["ranks"])
    rows.append(f"| twin execute | {mbs} | {recipe} | {s['iteration_s']:.4f} | {s['tokens_per_s']:.0f} | {100*s['mfu']:.1f}% "
                f"(peak {peak:.1f} GiB) |")
for line in open(os.path.join(out, "pytorch_baseline.jsonl")) if os.path.exists(os.path.join(out, "pytorch_baseline.jsonl")) else []:
    r = json.loads(line)
    rows.append(f"| PyTorch {r['mode']} | {r['micro_batch']} | {r['recipe']} | {r['median_step_s']:.4f} | {r['tokens_per_s']:.0f} | {100*r['mfu']:.1f}% |")
open(os.path.join(out, "summary.md"), "w").write("\n".join(rows) + "\n")
print("\n".join(rows))
PY
exit $status
