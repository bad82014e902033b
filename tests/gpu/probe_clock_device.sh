#!/usr/bin/env bash
# The clock probe against NVML on one GPU (issue 37 item 1; calibrate/gpu/stream_marks.hpp): the GPU test
# `SustainedClock.ProbeClockAgreesWithNvml` twice per operand, then the long curve of `twin calibrate
# --sustained-clock` (four duties, BF16 and FP8 GEMMs), whose per-GPU lines print the probe's clock, NVML's, the GEMMs'
# cycles' and the power at each duty; nvidia-smi's clock and power every 200 ms beside both (read only).
# $OUT: sustained_clock_test.log, curve.log, curve.json (the machine's shipped one-GPU profile with the new curves),
# gpu_clocks.csv.
# Usage (device): OUT=DIR bash tests/gpu/probe_clock_device.sh BIN_DIR   (BIN_DIR: tests/gpu/make_carry.sh's folder)
set -uo pipefail
cd "$(dirname "$0")/../.."
bin="$1"
OUT="${OUT:-out/probe-clock}"
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
status=0
case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in
  *H100*) profile=h100-x1 ;;
  *) profile=h200-x1 ;;
esac
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,driver_version --format=csv | tee "$OUT/gpu.csv"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,clocks_event_reasons.active --format=csv -lms 200 \
  > "$OUT/gpu_clocks.csv" &
smi=$!
trap 'kill $smi 2>/dev/null' EXIT
echo "=== test $(date -u +%H:%M:%S)"
"$bin/test_gpu" --gtest_filter='Operands/SustainedClock.*' --gtest_repeat=2 > "$OUT/sustained_clock_test.log" 2>&1 ||
  status=1
grep -E "^(bf16|fp8)|OK|FAILED" "$OUT/sustained_clock_test.log"
echo "=== curve $(date -u +%H:%M:%S)"
cp "cost/profiles/$profile.json" "$OUT/curve.json"
"$bin/twin" calibrate --profile "$OUT/curve.json" --sustained-clock > "$OUT/curve.log" 2>&1 || status=1
grep -E "sustained clock" "$OUT/curve.log"
echo "=== done $(date -u +%H:%M:%S), status $status"
exit $status
