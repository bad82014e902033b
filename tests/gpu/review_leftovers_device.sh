#!/usr/bin/env bash
# The GPU checks of issue 42's review leftovers and issue 41's priced transpose (2026-11-30), on two GPUs in one call:
#   1. the whole GPU test suite (test_gpu): the kernels, the FP8 transpose entry, the dropout keys under SP and CP;
#   2. FP8 under sequence parallelism (tests/gpu/fp8_tp_device.sh, FP8_PLANS bf16-tp2-sp fp8-tp2-sp delayed-tp2-sp):
#      the transpose after the FP8 gather is an op of its own now, run by the executor where the graph says;
#   3. context_check.py (CP 2 ring: RoPE's rows through executor/context_rows.hpp), limited to TWIN_CONTEXT_LIMIT_S.
#   bash tests/gpu/review_leftovers_device.sh BIN OUT [FP8_ITERS]
# BIN: a folder made by tests/gpu/make_carry.sh. OUT gets test_gpu.log, fp8-sp/ (summary.md), context.log and tables.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(realpath "$1"); out=$(realpath -m "$2"); fp8_iters=${3:-40}
mkdir -p "$out"
export LD_LIBRARY_PATH=$bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}" PYTHONUNBUFFERED=1
status=0
date -u +"start %FT%TZ"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
SECONDS=0
"$bin/test_gpu" > "$out/test_gpu.log" 2>&1 || status=1
echo "test_gpu: ${SECONDS} s"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED  \]" "$out/test_gpu.log" | head -20
SECONDS=0
FP8_PLANS="bf16-tp2-sp fp8-tp2-sp delayed-tp2-sp" GTEST_FILTER="*Fp8SequenceParallel*:*Fp8Transpose*" \
  bash "$repo/tests/gpu/fp8_tp_device.sh" "$bin" "$out/fp8-sp" "$fp8_iters" > "$out/fp8-sp.log" 2>&1 || status=1
echo "fp8 sp: ${SECONDS} s"; cat "$out/fp8-sp/summary.md" 2>/dev/null
SECONDS=0
(cd "$repo/tests/gpu" && timeout "${TWIN_CONTEXT_LIMIT_S:-150}" python3 context_check.py --twin "$bin/twin" --gpus 2 \
  --iters 8 --out /tmp/review-context > "$out/context.log" 2>&1) || status=1
cp /tmp/review-context/context_check.md /tmp/review-context/context_check.json "$out/" 2>/dev/null
echo "context: ${SECONDS} s"; grep -E "^\| " "$out/context.log" | tail -20
date -u +"end %FT%TZ status $status"
exit $status
