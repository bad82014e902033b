#!/usr/bin/env bash
# Kernel shapes off a shipped profile's grid (issue 37 item 1, issue 40 item 1), on one GPU: the kernel calibration's
# GPU tests (every head dim the executor's cuDNN attention runs is benched; skipped by a pack without test_gpu), the
# grid's shapes the profile lacks added by `twin calibrate --profile` (head dims 96 and 256 and soft-capped losses
# since 2026-11-30 16:00 UTC, LayerNorm since 17:00, attention at two and four sequences a batch since 22:00), then blind
# studies of scenarios that need them, planned with the shipped profile before anything was added.
# Usage (device): OUT=DIR bash tests/gpu/head_dims_device.sh BIN PROFILE SCENARIO...
#   -> OUT/tests.log, OUT/grid.log, OUT/profile-grid.json, OUT/<scenario>-work.tar.gz and logs (blind_study.sh)
set -uo pipefail
cd "$(dirname "$0")/../.."
bin="$1" profile="$2"; shift 2
OUT="${OUT:-out/head-dims}"
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
status=0
if [ -x "$bin/test_gpu" ]; then  # a pack without the GPU tests (the device copy's size limit) skips them
  "$bin/test_gpu" --gtest_filter='KernelCalibration.*:*Attention*' > "$OUT/tests.log" 2>&1 || status=1
  grep -E '^\[  (PASSED|FAILED) |^\[  FAILED' "$OUT/tests.log" | head -20
fi
"$bin/twin" calibrate --profile "$profile" --out "$OUT/profile-grid.json" > "$OUT/grid.log" 2>&1 || status=1
grep -E 'added|error' "$OUT/grid.log" | tail -5
studies=()
for scenario in "$@"; do studies+=("$scenario:$(basename "$profile" .json)"); done
TWIN="$bin/twin" OUT="$OUT" bash tests/gpu/blind_study.sh "${studies[@]}" || status=1
echo "=== head dims: status $status"
exit $status
