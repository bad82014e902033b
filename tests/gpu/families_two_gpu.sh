#!/usr/bin/env bash
# The plan families on two GPUs (issue 42: every family plan the simulator ranks runs; after the family interface,
# executor/gpu/execute.cpp without family branches): per-layer layouts, hot switching between layouts, double strand
# under TP 2 and over two stages, context parallelism (the ring), and the two-GPU resharding GPU test, each check
# against its single-GPU loss curve and its prediction (the checks' own tolerances). Each check runs under its share
# of TWIN_CHECK_BUDGET_S (default 500 s); logs and the checks' .md summaries under $OUT.
# Usage (device, two GPUs): OUT=DIR bash tests/gpu/families_two_gpu.sh BIN
set -uo pipefail
bin="$(cd "$1" && pwd)"
OUT="${OUT:-out/families-2gpu}"
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$bin/lib:${LD_LIBRARY_PATH:-}" NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
budget="${TWIN_CHECK_BUDGET_S:-500}"
status=0
date -u +"start %FT%TZ" > "$OUT/run.log"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> "$OUT/run.log"
if [ -x "$bin/test_gpu" ]; then
  timeout 60 "$bin/test_gpu" --gtest_filter='*Resharding*' > "$OUT/test_gpu.log" 2>&1 || status=1
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests? ran" "$OUT/test_gpu.log" >> "$OUT/run.log"
fi
for check in per_layer_layouts_check hot_switch_layouts_check strands_check context_check; do
  timeout $((budget / 4)) python3 tests/gpu/$check.py --twin "$bin/twin" --gpus 2 --profile h200-x2 --out "$OUT/$check" \
    > "$OUT/$check.log" 2>&1
  rc=$?
  [ $rc -eq 0 ] || status=1
  echo "$check rc $rc $(date -u +%T)" >> "$OUT/run.log"
done
# What comes back from a device is small: the checks' summaries and logs, not their runs' traces.
find "$OUT" -type d -name traces -prune -exec rm -rf {} +
find "$OUT" -type f -size +1M -delete
exit $status
