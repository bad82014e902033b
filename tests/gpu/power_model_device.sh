#!/usr/bin/env bash
# The power model's device check (issue 37 item 1, issue 40; cost/power_model.hpp): the NVML GPU tests, the
# calibration's power loads and fit (`twin calibrate --sustained-clock` into a copy of the shipped h200-x1, whose
# log holds every load's power, clock and work and the fit with its held-out points), then the held-out training
# steps: tests/gpu/moe_clock_device.sh's Qwen3-MoE- and DeepSeek-V3-shaped steps and the dense Llama-2-7B-width one,
# each with nvidia-smi's clock and power every 100 ms (gpu_clocks.csv). About 2 minutes on one H200.
# With BIN/power_loads (tests/gpu/power_loads/build.sh) the loads and the fit run alone and print JSON
# (power_loads.json) in place of twin calibrate; BIN/nvml_power_test stands for test_gpu's NVML tests.
# Usage (device): OUT=DIR bash tests/gpu/power_model_device.sh BIN
set -uo pipefail
bin="$(cd "$1" && pwd)"
OUT="${OUT:-out/power-model}"
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$bin/lib:${LD_LIBRARY_PATH:-}" NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
status=0
{ date -u +"start %FT%TZ"
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader; } > "$OUT/run.log"
if [ -x "$bin/test_gpu" ] || [ -x "$bin/nvml_power_test" ]; then
  test_binary="$bin/test_gpu"; [ -x "$test_binary" ] || test_binary="$bin/nvml_power_test"
  "$test_binary" --gtest_filter='NvmlPower.*' > "$OUT/nvml_test.log" 2>&1 || status=1
  tail -3 "$OUT/nvml_test.log" >> "$OUT/run.log"
else
  echo "no test_gpu in $bin: the NVML GPU tests not run" >> "$OUT/run.log"
fi
date -u +"calibrate %FT%TZ" >> "$OUT/run.log"
if [ -x "$bin/power_loads" ]; then  # the calibration's loads and fit alone (tests/gpu/power_loads/), no profile written
  "$bin/power_loads" > "$OUT/power_loads.json" 2> "$OUT/calibrate.log" || status=1
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps(d["power_model"])); [print(json.dumps(f)) for f in d["fit"]]' \
    "$OUT/power_loads.json" >> "$OUT/run.log" 2>&1
else
  "$bin/twin-gpu" calibrate --sustained-clock --profile cost/profiles/h200-x1.json --out "$OUT/h200-x1-power.json" \
    > "$OUT/calibrate.log" 2>&1 || status=1
  grep -E "power model|memory-only|one-thread|wrote" "$OUT/calibrate.log" >> "$OUT/run.log"
fi
if [ -x "$bin/twin-gpu" ]; then
  date -u +"steps %FT%TZ" >> "$OUT/run.log"
  OUT="$OUT/steps" bash tests/gpu/moe_clock_device.sh "$bin" || status=1
  cat "$OUT/steps/summary.md" >> "$OUT/run.log" 2>/dev/null
  ( cd "$OUT" && tar czf steps.tar.gz steps && rm -rf steps )
fi
date -u +"end %FT%TZ rc $status" >> "$OUT/run.log"
exit $status
