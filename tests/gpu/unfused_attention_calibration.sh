#!/usr/bin/env bash
# Unfused attention timed by twin calibrate (issue 42 item 4, issue 37): from the repository root with the binaries
# in $1 (twin-gpu, test_gpu and lib/ as tests/gpu/make_carry.sh packs them). The kernel calibration's GPU tests
# (KernelCalibration.*, among them the unfused attention bench); then the GPT-3 1.7B-width unfused plan of
# tests/gpu/fixtures/ predicted with the shipped h200-x1 profile, the same profile with the scenario's own kernel
# shapes measured (`twin calibrate --scenario`: the unfused attention ops among them), and run: measured against both
# predictions, per op and whole. Logs and tables under $OUT.
set -uo pipefail
bin="$(cd "$1" && pwd)"
OUT="${OUT:-out/unfused-attention-calibration}"
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$bin/lib:${LD_LIBRARY_PATH:-}" NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
status=0
scenario=tests/gpu/fixtures/gpt3-1.7b-unfused-1xH200.json
work=/tmp/unfused-calibration
mkdir -p "$work/shipped" "$work/calibrated"
date -u +"start %FT%TZ" > "$OUT/run.log"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader >> "$OUT/run.log"
"$bin/test_gpu" --gtest_filter='KernelCalibration.*' > "$OUT/kernel_calibration_test.log" 2>&1 || status=1
date -u +"tests done %FT%TZ" >> "$OUT/run.log"
"$bin/twin-gpu" calibrate --scenario "$scenario" --profile h200-x1 --out "$work/h200-x1-plus.json" \
  > "$OUT/calibrate.log" 2>&1 || status=1
date -u +"calibrated %FT%TZ" >> "$OUT/run.log"
"$bin/twin-gpu" simulate "$scenario" --out "$work/shipped" --quiet --top 0 > "$OUT/simulate.log" 2>&1 || status=1
"$bin/twin-gpu" simulate "$scenario" --profile "$work/h200-x1-plus.json" --out "$work/calibrated" --quiet --top 0 \
  >> "$OUT/simulate.log" 2>&1 || status=1
"$bin/twin-gpu" execute --plan "$work/calibrated/best.json" --run "$work/calibrated" --iters 20 --warmup 3 \
  > "$OUT/execute.log" 2>&1 || status=1
date -u +"ran %FT%TZ" >> "$OUT/run.log"
python3 - "$work" > "$OUT/summary.md" <<'PY' || status=1
import csv, json, sys
work = sys.argv[1]
def attention(folder):
    rows = list(csv.DictReader(open(f"{work}/{folder}/ops.csv")))
    out = {}
    for phase in ("forward", "backward"):
        sel = [r for r in rows if r["role"] == "core_attention" and r["kind"].startswith("attention") and r["phase"] == phase]
        out[phase] = (sum(float(r["predicted_duration_ns"]) for r in sel) / len(sel),
                      sum(float(r["measured_median_ns"]) for r in sel) / len(sel))
    return out
run = json.load(open(f"{work}/calibrated/metrics.json"))
measured = run["measured"]["iteration_s"]
calibrated = run["predicted"]["iteration_time_s"]
shipped_s = json.load(open(f"{work}/shipped/best.json"))["predicted"]["iteration_time_s"]
print(f"| profile | predicted s | measured s | error |\n|---|---|---|---|")
print(f"| h200-x1 (shipped) | {shipped_s:.4f} | {measured:.4f} | {100 * (measured / shipped_s - 1):+.1f}% |")
print(f"| h200-x1 + the scenario's shapes | {calibrated:.4f} | {measured:.4f} | {100 * (measured / calibrated - 1):+.1f}% |")
for phase, (predicted, timed) in attention("calibrated").items():
    print(f"\nunfused attention {phase}: {timed / 1e3:.1f} us measured, {predicted / 1e3:.1f} us predicted with the calibrated profile")
PY
cat "$OUT/summary.md" >> "$OUT/run.log"
(cd "$work" && tar czf "$OUT/runs.tar.gz" --exclude=traces --exclude=measured --exclude='*.html' --exclude=profile.json \
  shipped calibrated h200-x1-plus.json)
date -u +"end %FT%TZ status $status" >> "$OUT/run.log"
exit $status
