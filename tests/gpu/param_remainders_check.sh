#!/usr/bin/env bash
# training.store_param_remainders on one GPU, in one device call: the optimizer's GPU tests, then one model trained
# from the same seed with the fp32 master weights as whole fp32 copies (OUT/run-fp32, and again: OUT/run-fp32-again,
# the run-to-run spread of the default cuDNN attention) and as the bf16 parameters' 16-bit remainders
# (OUT/run-remainders), each planned with the shipped H200 profile and run by twin execute. The summary
# (OUT/summary.md) sets them side by side: step times and the optimizer step against their predictions, each peak
# against the memory model's and the peaks' difference against the model's, the first step's loss (the same bits: no
# update has run) and the last ten steps' mean. Exits non-zero when a step fails, a peak is more than 3% from the
# model's, the first losses differ or the last ten steps' means of the two masters are more than 1% apart.
#   bash tests/gpu/param_remainders_check.sh BIN OUT [ITERS]
# BIN: a folder made by tests/gpu/make_carry.sh; ITERS default 60 (5 warm-up). BASE: another BF16 scenario (default
# scenarios/llama2-7b-4layers-bf16-1xH200.json).
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(realpath "$1"); out=$(realpath -m "$2"); iters=${3:-60}
mkdir -p "$out"
source "$repo/tests/gpu/logged_steps.sh"
step test_gpu "$bin/test_gpu" --gtest_filter="${GTEST_FILTER:-KernelOptimizer.*:KernelCalibration.MeasuresEveryKind*}"
grep -hE "^\[  (PASSED|FAILED)|\[adamw remainders\]" "$out/test_gpu.log"
base=$(realpath "${BASE:-$repo/scenarios/llama2-7b-4layers-bf16-1xH200.json}")
python3 - "$base" "$out" <<'PY' || status=1
import json, sys
for name, remainders in (("fp32", False), ("fp32-again", False), ("remainders", True)):
    scenario = json.load(open(sys.argv[1]))
    scenario["training"]["store_param_remainders"] = remainders
    scenario["name"] += f"; master weights as {name} (tests/gpu/param_remainders_check.sh)"
    json.dump(scenario, open(f"{sys.argv[2]}/scenario-{name}.json", "w"), indent=1)
PY
for name in fp32 fp32-again remainders; do
  run=$out/run-$name
  step simulate-$name "$bin/twin" simulate "$out/scenario-$name.json" --profile "$repo/cost/profiles/h200-x1.json" \
    --out "$run" --top 0 --quiet
  step execute-$name "$bin/twin" execute --plan "$run/best.json" --run "$run" --iters "$iters" --warmup 5
done
python3 - "$out" <<'PY' | tee "$out/summary.md"
import json, sys
out = sys.argv[1]
runs = {name: json.load(open(f"{out}/run-{name}/metrics.json")) for name in ("fp32", "fp32-again", "remainders")}
ok = True
print("| master | measured step s | predicted step s | error | optimizer step ms (predicted) | peak GiB | predicted GiB | "
      "error | first loss | last-10 mean |")
print("|---|---|---|---|---|---|---|---|---|---|")
peaks, predicted_peaks, tails = {}, {}, {}
for name, m in runs.items():
    rank = max(m["ranks"], key=lambda r: r["peak_memory_GiB"])
    peaks[name], predicted_peaks[name] = rank["peak_memory_GiB"], rank["predicted_allocated_peak_GiB"]
    memory_error = predicted_peaks[name] / peaks[name] - 1
    ok = ok and abs(memory_error) <= 0.03
    losses = [s["loss"] for s in m["steps"]]
    tails[name] = sum(losses[-10:]) / len(losses[-10:])
    ms, ps = m["measured"]["iteration_s"], m["predicted"]["iteration_time_s"]
    with open(f"{out}/run-{name}/ops.csv") as ops:
        header = ops.readline().strip().split(",")
        step_op = [dict(zip(header, line.strip().split(","))) for line in ops if ",optimizer_step," in line]
    optimizer = " ".join(f"{int(o['measured_median_ns']) / 1e6:.2f} ({int(o['predicted_duration_ns']) / 1e6:.2f})"
                         for o in step_op)
    print(f"| {name} | {ms:.4f} | {ps:.4f} | {100 * (ms / ps - 1):+.2f}% | {optimizer} | {peaks[name]:.3f} | "
          f"{predicted_peaks[name]:.3f} | {100 * memory_error:+.2f}% | {losses[0]:.6f} | {tails[name]:.4f} |")
first = [m["steps"][0]["loss"] for m in runs.values()]
ok = ok and len(set(first)) == 1 and abs(tails["remainders"] / tails["fp32"] - 1) <= 0.01
print(f"\npeak saved: measured {peaks['fp32'] - peaks['remainders']:.3f} GiB, predicted "
      f"{predicted_peaks['fp32'] - predicted_peaks['remainders']:.3f} GiB; first losses "
      f"{'the same' if len(set(first)) == 1 else 'DIFFERENT'}; last ten steps' mean "
      f"{100 * (tails['remainders'] / tails['fp32'] - 1):+.3f}% from the fp32 master's (within 1%: "
      f"{abs(tails['remainders'] / tails['fp32'] - 1) <= 0.01}), the fp32 master's second run "
      f"{100 * (tails['fp32-again'] / tails['fp32'] - 1):+.3f}% from its first")
sys.exit(0 if ok else 1)
PY
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
date -u
exit $status
