#!/usr/bin/env bash
# The device call of issue 42 item 4 (GPT-style models), from the repository root with the binaries in $1 (twin,
# twin-gpu, test_gpu and lib/ as tests/gpu/make_carry.sh packs them): the GPT kernels' GPU tests and the LayerNorm
# ones, then tests/gpu/gpt_check.py. Logs and tables under $OUT.
set -uo pipefail
bin="$(cd "$1" && pwd)"
OUT="${OUT:-out/gpt-device}"
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$bin/lib:${LD_LIBRARY_PATH:-}" NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
status=0
date -u +"start %FT%TZ" > "$OUT/run.log"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader >> "$OUT/run.log"
"$bin/test_gpu" --gtest_filter='*KernelBias*:*KernelPositions*:*KernelNormEntry*:*KernelNorm.*' \
  > "$OUT/kernels_gpt_test.log" 2>&1 || status=1
date -u +"kernels done %FT%TZ" >> "$OUT/run.log"
python3 tests/gpu/gpt_check.py --twin "$bin/twin-gpu" --out /tmp/gpt-check --iters "${GPT_ITERS:-40}" \
  > "$OUT/gpt_check.log" 2>&1 || status=1
cp /tmp/gpt-check/gpt_check.md /tmp/gpt-check/gpt_check.json /tmp/gpt-check/gpt_check.log "$OUT/" 2>/dev/null
# The scenario's own kernel shapes measured into the shipped profile (twin calibrate --scenario: only what h200-x1
# lacks, LayerNorm's keys among them), then its best plan predicted with that profile and run.
plus=/tmp/gpt-check/calibrated-best
mkdir -p "$plus"
"$bin/twin-gpu" calibrate --scenario scenarios/gpt-small-1xH200.json --profile h200-x1 --out "$plus/h200-x1-plus.json" \
  > "$OUT/calibrate.log" 2>&1 || status=1
"$bin/twin-gpu" simulate scenarios/gpt-small-1xH200.json --profile "$plus/h200-x1-plus.json" --out "$plus" --quiet \
  --top 0 >> "$OUT/calibrate.log" 2>&1 || status=1
"$bin/twin-gpu" execute --plan "$plus/best.json" --run "$plus" --iters "${GPT_ITERS:-40}" --warmup 3 \
  >> "$OUT/calibrate.log" 2>&1 || status=1
date -u +"calibrated run done %FT%TZ" >> "$OUT/run.log"
# Each run's numbers (metrics, steps, ops, the plan, the fold's changes), not its traces, in one file.
(cd /tmp/gpt-check && tar czf "$OUT/gpt-check-runs.tar.gz" --exclude=traces --exclude=measured --exclude='*.html' */)
date -u +"end %FT%TZ status $status" >> "$OUT/run.log"
exit $status
