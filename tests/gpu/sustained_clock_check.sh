#!/usr/bin/env bash
# The sustained-clock curve measured on every GPU of the machine (twin calibrate --sustained-clock) with
# nvidia-smi sampling SM clock, power and temperature beside it every 200 ms (the reference the probe's clocks are
# compared with: tests/gpu/sustained_clock_smi.py), then the GPU test of the probe against the GEMMs' cycles.
# Usage: bash tests/gpu/sustained_clock_check.sh BIN_DIR OUT_DIR [PROFILE]   (BIN_DIR from tests/gpu/make_carry.sh)
set -euo pipefail
bin="$1"; out="$2"; profile="${3:-h200-x4}"
mkdir -p "$out"
nvidia-smi --query-gpu=index,name,driver_version,power.limit,clocks.max.sm,temperature.gpu --format=csv > "$out/gpus.csv"
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw,temperature.gpu --format=csv,noheader,nounits -lms 200 \
  > "$out/smi.csv" &
smi=$!
trap 'kill $smi 2>/dev/null || true' EXIT
start=$(date +%s%N)
"$bin/twin" calibrate --sustained-clock --profile "$profile" --out "$out/$profile-clock.json" 2>&1 | tee "$out/calibrate.log"
echo "calibrate --sustained-clock: $(( ($(date +%s%N) - start) / 1000000 )) ms wall"
kill $smi 2>/dev/null || true
if [ -x "$bin/test_gpu" ]; then "$bin/test_gpu" --gtest_filter='SustainedClock.*' 2>&1 | tail -8; fi
