#!/usr/bin/env bash
# The device call of attention dropout and of hidden dropout in per-layer plans (issue 42), from the repository root
# with the binaries in $1 (twin, twin-gpu, test_gpu and lib/ as tests/gpu/make_carry.sh packs them): the attention
# GPU tests (with and without dropout) and the dropout kernels', tests/gpu/dropout_check.py (one GPU; TP 2 + SP and DP
# 2 where two GPUs are present) and the per-layer plans with hidden dropout of tests/gpu/per_layer_layouts_check.py.
# Logs and tables under $OUT; the per-layer runs' folders (rank logs included) in $OUT/per-layer-runs.tar.gz.
set -uo pipefail
bin="$(cd "$1" && pwd)"
OUT="${OUT:-out/attention-dropout-device}"
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$bin/lib:${LD_LIBRARY_PATH:-}" NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
status=0
gpus=$(nvidia-smi -L | wc -l)
two=$((gpus < 2 ? gpus : 2))
date -u +"start %FT%TZ" > "$OUT/run.log"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader >> "$OUT/run.log"
"$bin/test_gpu" --gtest_filter="${ATTENTION_TESTS:-*AttentionDropout*:Shapes/Attention.*:Windows/Attention.*:*KernelDropout*}" \
  > "$OUT/attention_tests.log" 2>&1 || status=1
date -u +"tests done %FT%TZ status $status" >> "$OUT/run.log"
if [ "$two" -ge 2 ]; then
  python3 tests/gpu/per_layer_layouts_check.py --twin "$bin/twin-gpu" --out /tmp/per-layer --gpus 2 \
    --only single-dropout,tp2-tp1-mixed-dropout,ulysses2-mixed-dropout,ulysses2-half-sample-edges-dropout \
    > "$OUT/per_layer.log" 2>&1 || status=1
  cp /tmp/per-layer/per_layer_layouts_check.md /tmp/per-layer/per_layer_layouts_check.json "$OUT/" 2>/dev/null
  (cd /tmp/per-layer && tar czf "$OUT/per-layer-runs.tar.gz" --exclude=traces --exclude=measured --exclude='*.html' .) \
    2>/dev/null
  date -u +"per-layer done %FT%TZ status $status" >> "$OUT/run.log"
fi
python3 tests/gpu/dropout_check.py --twin "$bin/twin-gpu" --out /tmp/dropout-check --gpus "$two" \
  --iters "${DROPOUT_ITERS:-40}" ${DROPOUT_CASES:+--only "$DROPOUT_CASES"} > "$OUT/dropout_check.log" 2>&1 || status=1
cp /tmp/dropout-check/dropout_check.md /tmp/dropout-check/dropout_check.json /tmp/dropout-check/dropout_check.log \
  "$OUT/" 2>/dev/null
(cd /tmp/dropout-check && tar czf "$OUT/dropout-check-runs.tar.gz" --exclude=traces --exclude=measured \
  --exclude='*.html' */) 2>/dev/null
date -u +"end %FT%TZ status $status" >> "$OUT/run.log"
exit $status
