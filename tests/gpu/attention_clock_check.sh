#!/usr/bin/env bash
# Attention timed at the GEMMs' reference clock (issue 37): the kernel calibration's GPU test (the clock probed beside
# each attention timing, the scaling to the reference as cycles), then a full one-GPU `twin calibrate` whose profile
# states attention_at_reference_clock; its log lists each attention shape with the clock it ran at.
# Usage: bash tests/gpu/attention_clock_check.sh BIN_DIR OUT_DIR   (BIN_DIR from tests/gpu/make_carry.sh)
# The profile is then judged on the CPU against stored blind runs (docs/ACCURACY.md, "Attention at the training clock").
set -uo pipefail
bin="$1"; out="$2"
mkdir -p "$out"
status=0
nvidia-smi --query-gpu=index,name,driver_version,power.limit,clocks.max.sm,temperature.gpu --format=csv > "$out/gpus.csv"
"$bin/test_gpu" --gtest_filter='KernelCalibration.*:SustainedClock.*' > "$out/test_gpu.log" 2>&1 || status=1
tail -5 "$out/test_gpu.log"
start=$(date +%s)
"$bin/twin" calibrate --out "$out/profile.json" > "$out/calibrate.log" 2>&1 || status=1
echo "twin calibrate: $(( $(date +%s) - start )) s wall, rc so far $status"
grep -E "attention_(forward|backward)|wrote|sustained clock:" "$out/calibrate.log" | sed 's/^\[info\] \[calibrate\] //'
exit $status
