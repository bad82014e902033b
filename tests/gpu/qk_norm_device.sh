#!/usr/bin/env bash
# Issue 40's QK-norm check on one GPU, from the repository root with the binaries in $1 (tests/gpu/make_carry.sh):
# tests/gpu/moe_shapes_device.sh on the scenario (default the Qwen3-MoE-shaped one: the GPU tests of QK-norm, the
# norms and the MoE kernels against their float64 references, then its best plan simulated with the shipped profile
# and run); then the scenario's kernel shapes measured into the shipped profile (twin calibrate --scenario: QK-norm's
# op timed through the norm entry on contiguous rows) and the best plan predicted with that profile and run again.
# $OUT/qk_norm.md: QK-norm's ops and the step, measured against predicted, both ways; $OUT/run.log; everything else
# in $OUT/qk_norm.tar.gz.
# Usage (device): OUT=DIR bash tests/gpu/qk_norm_device.sh BIN [SCENARIO]
set -uo pipefail
bin="$(cd "$1" && pwd)"
scenario="${2:-scenarios/exec-qwen3-moe-small-1xH200.json}"
name=$(basename "$scenario" .json)
OUT="${OUT:-out/qk-norm}"; work=/tmp/qk-norm
mkdir -p "$OUT"; rm -rf "$work"; mkdir -p "$work/shipped" "$work/calibrated"
export LD_LIBRARY_PATH="$bin/lib:${LD_LIBRARY_PATH:-}" NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
status=0
OUT="$work/shipped" bash tests/gpu/moe_shapes_device.sh "$bin" "$scenario" || status=1
date -u +"shipped profile done %FT%TZ" >> "$work/shipped/run.log"
timeout "${CAL_TIMEOUT:-120}" "$bin/twin-gpu" calibrate --scenario "$scenario" --profile h200-x1 \
  --out "$work/h200-x1-plus.json" > "$work/calibrated/calibrate.log" 2>&1 || status=1
{ "$bin/twin-gpu" simulate "$scenario" --profile "$work/h200-x1-plus.json" --out "$work/run" --quiet --top 0 &&
  "$bin/twin-gpu" execute --best --run "$work/run" --iters "${CAL_ITERS:-24}" --warmup 3; } \
  > "$work/calibrated/run.log" 2>&1 || status=1
cp "$work/run/metrics.json" "$work/run/ops.csv" "$work/calibrated/" 2>/dev/null
date -u +"calibrated profile done %FT%TZ" >> "$work/shipped/run.log"
{
  for profile in shipped calibrated; do
    dir="$work/$profile"; [ "$profile" = shipped ] && dir="$work/shipped/$name"
    echo "### $profile profile"
    python3 - "$dir/metrics.json" <<'PY' || status=1
import json, sys
m = json.load(open(sys.argv[1]))
measured, predicted = m["measured"]["iteration_s"], m["predicted"]["iteration_time_s"]
print(f"step {measured:.4f} s measured, {predicted:.4f} s predicted ({100 * (measured / predicted - 1):+.1f}%), "
      f"loss {m['steps'][0]['loss']:.3f} -> {m['steps'][-1]['loss']:.3f} over {len(m['steps'])} steps")
PY
    python3 tests/gpu/ops_by_role.py "$dir/ops.csv" qk_norm || status=1
    echo
  done
  echo "### the largest ops, shipped profile"
  python3 tests/gpu/ops_by_role.py "$work/shipped/$name/ops.csv" | sed -n '1,14p'  # reads all: no broken pipe
} > "$OUT/qk_norm.md" 2>&1
cp "$work/shipped/run.log" "$OUT/run.log"
tar -C "$work" -czf "$OUT/qk_norm.tar.gz" shipped calibrated
exit $status
