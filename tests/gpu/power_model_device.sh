#!/usr/bin/env bash
# The power model's device check (issue 37 item 1, issue 40; cost/power_model.hpp): the NVML GPU tests (the power
# loads among them), then `twin calibrate --sustained-clock` on one GPU into a copy of the shipped h200-x1 and (with
# COUNTS="1 2" on a machine of two GPUs) on both into a copy of h200-x2: their logs hold every load's power, clock and work (the
# curve's, the memory-only and one-thread loads, the GEMMs beside idle SMs, the held-out grouped expert GEMM and
# attention) and the fit with its left-out and held-out loads. Then (STEPS=1, the default) the held-out training
# steps: tests/gpu/moe_clock_device.sh's Qwen3-MoE- and DeepSeek-V3-shaped steps and the dense Llama-2-7B-width
# one, each with nvidia-smi's clock and power every 100 ms (gpu_clocks.csv). About 2 minutes on one H200.
# Usage (device): OUT=DIR [STEPS=0|1] [COUNTS="1 2"] bash tests/gpu/power_model_device.sh BIN
set -uo pipefail
bin="$(cd "$1" && pwd)"
OUT="${OUT:-out/power-model}"
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$bin/lib:${LD_LIBRARY_PATH:-}" NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
status=0
{ date -u +"start %FT%TZ"
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader; } > "$OUT/run.log"
if [ -x "$bin/test_gpu" ]; then
  "$bin/test_gpu" --gtest_filter='NvmlPower.*' > "$OUT/nvml_test.log" 2>&1 || status=1
  tail -3 "$OUT/nvml_test.log" >> "$OUT/run.log"
else
  echo "no test_gpu in $bin: the NVML GPU tests not run" >> "$OUT/run.log"
fi
gpus=$(nvidia-smi -L | wc -l)
for n in ${COUNTS:-1}; do
  [ "$gpus" -ge "$n" ] || continue
  date -u +"calibrate on $n GPU(s) %FT%TZ" >> "$OUT/run.log"
  "$bin/twin-gpu" calibrate --sustained-clock --power-model --gpus "$n" --profile "cost/profiles/h200-x$n.json" \
    --out "$OUT/h200-x$n-power.json" > "$OUT/calibrate-x$n.log" 2>&1 || status=1
  grep -E "power model|load|wrote" "$OUT/calibrate-x$n.log" >> "$OUT/run.log"
done
if [ "${STEPS:-1}" = 1 ]; then
  date -u +"steps %FT%TZ" >> "$OUT/run.log"
  OUT="$OUT/steps" bash tests/gpu/moe_clock_device.sh "$bin" || status=1
  cat "$OUT/steps/summary.md" >> "$OUT/run.log" 2>/dev/null
  ( cd "$OUT" && tar czf steps.tar.gz steps && rm -rf steps )
fi
date -u +"end %FT%TZ rc $status" >> "$OUT/run.log"
exit $status
