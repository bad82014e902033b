#!/usr/bin/env bash
# A merged tree's check on a machine of two GPUs, in one device call, with the binaries in $1 (twin, twin-gpu,
# test_gpu and lib/ as tests/gpu/make_carry.sh packs them):
#   1. every GPU test (one_gpu_release_check.sh's test_gpu step; tests of two GPUs run rather than skip here);
#   2. the per-layer plan with Ulysses edges on two GPUs (per_layer_ulysses_device.sh);
#   3. `twin calibrate --gpus 2`, the profile shipped as cost/profiles/h200-x2.json when it is measured on H200s.
# STEPS (default "tests ulysses calibrate") picks steps. Everything lands in OUT/release.tar.gz (the device returns at
# most 8 files) beside OUT/summary.log and OUT/<gpu>-x2.json.
# Usage (device): OUT=DIR bash tests/gpu/release_two_gpu_check.sh BIN
set -uo pipefail
cd "$(dirname "$0")/../.."
bin="$(cd "$1" && pwd)"
OUT="${OUT:-out/release-two-gpu}"
work=/tmp/release-two-gpu
rm -rf "$work"; mkdir -p "$work" "$OUT"
export LD_LIBRARY_PATH="$bin/lib:${LD_LIBRARY_PATH:-}" NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
steps=" ${STEPS:-tests ulysses calibrate} "
summary="$OUT/summary.log"
status=0
{ date -u +"start %FT%TZ"; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader; } > "$summary"
if [[ "$steps" == *" tests "* ]]; then
  SECONDS=0
  STEPS=test_gpu bash tests/gpu/one_gpu_release_check.sh "$bin" "$work/tests" >> "$summary" 2>&1 || status=1
  echo "tests: ${SECONDS}s" >> "$summary"
fi
if [[ "$steps" == *" ulysses "* ]]; then
  SECONDS=0
  OUT="$work/ulysses" bash tests/gpu/per_layer_ulysses_device.sh "$bin" || status=1
  cat "$work/ulysses/run.log" >> "$summary"
  grep -E "step time|predicted|measured|loss" "$work/ulysses/execute.log" "$work/ulysses/compare.log" | tail -n 12 >> "$summary"
  echo "ulysses: ${SECONDS}s" >> "$summary"
fi
if [[ "$steps" == *" calibrate "* ]]; then
  SECONDS=0
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -oE 'H[0-9]+' | tr 'A-Z' 'a-z')
  "$bin/twin-gpu" calibrate --gpus 2 --out "$OUT/$gpu-x2.json" > "$work/calibrate-x2.log" 2>&1
  rc=$?; [ "$rc" -eq 0 ] || status=1
  echo "calibrate --gpus 2: ${SECONDS}s wall, exit $rc" >> "$summary"
  tail -n 5 "$work/calibrate-x2.log" >> "$summary"
fi
date -u +"end %FT%TZ status $status" >> "$summary"
tar -C "$work" -czf "$OUT/release.tar.gz" . 2>/dev/null
exit $status
