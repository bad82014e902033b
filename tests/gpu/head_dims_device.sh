#!/usr/bin/env bash
# Head dims off the old attention grid and the capped loss (issue 37 item 1, issue 40 item 1), on one GPU:
# the kernel calibration's GPU tests (every head dim the executor's cuDNN attention runs is benched), the grid's
# shapes a shipped profile lacks added by `twin calibrate --profile` (head dims 96 and 256, soft-capped losses), then
# blind studies of scenarios with those head dims, planned with the shipped profile before anything was added.
# Usage (device): OUT=DIR bash tests/gpu/head_dims_device.sh BIN PROFILE SCENARIO...
#   -> OUT/tests.log, OUT/grid.log, OUT/profile-grid.json, OUT/<scenario>-work.tar.gz and logs (blind_study.sh)
set -uo pipefail
cd "$(dirname "$0")/../.."
bin="$1" profile="$2"; shift 2
OUT="${OUT:-out/head-dims}"
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
status=0
"$bin/test_gpu" --gtest_filter='KernelCalibration.*:*Attention*' > "$OUT/tests.log" 2>&1 || status=1
grep -E '^\[  (PASSED|FAILED) |^\[  FAILED' "$OUT/tests.log" | head -20
"$bin/twin" calibrate --profile "$profile" --out "$OUT/profile-grid.json" > "$OUT/grid.log" 2>&1 || status=1
grep -E 'added|error' "$OUT/grid.log" | tail -5
studies=()
for scenario in "$@"; do studies+=("$scenario:$(basename "$profile" .json)"); done
TWIN="$bin/twin" OUT="$OUT" bash tests/gpu/blind_study.sh "${studies[@]}" || status=1
echo "=== head dims: status $status"
exit $status
