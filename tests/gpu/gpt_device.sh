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
python3 tests/gpu/gpt_check.py --twin "$bin/twin" --out /tmp/gpt-check --iters "${GPT_ITERS:-40}" \
  > "$OUT/gpt_check.log" 2>&1 || status=1
cp /tmp/gpt-check/gpt_check.md /tmp/gpt-check/gpt_check.json /tmp/gpt-check/gpt_check.log "$OUT/" 2>/dev/null
for run in /tmp/gpt-check/*/; do  # each run's numbers, not its traces
  name=$(basename "$run"); mkdir -p "$OUT/runs/$name"
  cp "$run"/metrics.json "$run"/steps.csv "$run"/best.json "$run"/ranking.csv "$OUT/runs/$name/" 2>/dev/null
done
date -u +"end %FT%TZ status $status" >> "$OUT/run.log"
exit $status
