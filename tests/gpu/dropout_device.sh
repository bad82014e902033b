#!/usr/bin/env bash
# The device call of hidden dropout (issue 42), from the repository root with the binaries in $1 (twin, twin-gpu,
# test_gpu and lib/ as tests/gpu/make_carry.sh packs them): the dropout kernels' GPU tests, then
# tests/gpu/dropout_check.py (one GPU, and TP 2 + SP and DP 2 where two GPUs are present). Logs and tables under $OUT.
set -uo pipefail
bin="$(cd "$1" && pwd)"
OUT="${OUT:-out/dropout-device}"
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$bin/lib:${LD_LIBRARY_PATH:-}" NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
status=0
gpus=$(nvidia-smi -L | wc -l)
date -u +"start %FT%TZ" > "$OUT/run.log"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader >> "$OUT/run.log"
"$bin/test_gpu" --gtest_filter='*KernelDropout*' > "$OUT/dropout_test.log" 2>&1 || status=1
date -u +"kernels done %FT%TZ" >> "$OUT/run.log"
python3 tests/gpu/dropout_check.py --twin "$bin/twin-gpu" --out /tmp/dropout-check --gpus "$((gpus < 2 ? gpus : 2))" \
  --iters "${DROPOUT_ITERS:-40}" > "$OUT/dropout_check.log" 2>&1 || status=1
cp /tmp/dropout-check/dropout_check.md /tmp/dropout-check/dropout_check.json /tmp/dropout-check/dropout_check.log \
  "$OUT/" 2>/dev/null
(cd /tmp/dropout-check && tar czf "$OUT/dropout-check-runs.tar.gz" --exclude=traces --exclude=measured \
  --exclude='*.html' */) 2>/dev/null
date -u +"end %FT%TZ status $status" >> "$OUT/run.log"
exit $status
