#!/usr/bin/env bash
# Attention timed at the GEMMs' reference clock (issue 37): the kernel calibration's GPU tests (the clock probed beside
# each attention timing, the scaling to the reference as cycles), then a full `twin calibrate` on every GPU of the
# machine, whose profile states attention_at_reference_clock and whose log lists each attention shape with the clock
# it ran at; its held-out check (`twin calibrate --check`: GEMMs and attention off the grids); then, given SCENARIO, a blind study of it planned and predicted with that fresh profile
# (tests/gpu/blind_study.sh). The runs are judged on the CPU (docs/ACCURACY.md, "Attention at the training clock").
# Usage (device): bash tests/gpu/attention_clock_check.sh BIN_DIR OUT_DIR [SCENARIO]   (BIN_DIR: tests/gpu/make_carry.sh)
set -uo pipefail
cd "$(dirname "$0")/../.."
bin="$1"; out="$2"; scenario="${3:-}"
mkdir -p "$out"
export NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
status=0
nvidia-smi --query-gpu=index,name,driver_version,power.limit,clocks.max.sm,temperature.gpu --format=csv > "$out/gpus.csv"
"$bin/test_gpu" --gtest_filter='KernelCalibration.*:SustainedClock.*:GemmBatch*' > "$out/test_gpu.log" 2>&1 || status=1
grep -E "^\[  (PASSED|FAILED) |tests ran|attention .* us at" "$out/test_gpu.log"
start=$(date +%s)
"$bin/twin" calibrate --out "$out/profile.json" > "$out/calibrate.log" 2>&1 || status=1
echo "twin calibrate: $(( $(date +%s) - start )) s wall, status $status"
grep -E "attention_(forward|backward)|wrote|sustained clock:|GEMM grid|GPUs agree" "$out/calibrate.log" | sed 's/^\[info\] \[calibrate\] //'
if [ -f "$out/profile.json" ]; then  # the held-out check: GEMMs and attention off the grids, collectives between sizes
  start=$(date +%s)
  "$bin/twin" calibrate --check "$out/profile.json" --check-out "$out/check" > "$out/check.log" 2>&1 || status=1
  echo "twin calibrate --check: $(( $(date +%s) - start )) s wall, status $status"
  grep -E "^\| (gemm|attention)" "$out/check/check.md" | head -40
fi
if [ -n "$scenario" ] && [ -f "$out/profile.json" ]; then
  OUT="$out" TWIN="$bin/twin" bash tests/gpu/blind_study.sh "$scenario:$out/profile.json" || status=1
fi
exit $status
