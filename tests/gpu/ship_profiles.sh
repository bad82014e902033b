#!/usr/bin/env bash
# Measures the profiles twin ships (cost/profiles/<gpu>-x<N>.json) in one device call: the whole
# GPU check (tests/gpu/run.sh: tests, calibration of every GPU, the independent check), then
# calibrations of fewer GPUs on the same machine. Logs are packed into one archive because the device
# returns at most 8 files. One calibration takes about 7 minutes since 2026-11-23 (three rounds over a grid
# to 32768), so a 10-minute device call holds one: run the full check with TWIN_GPU_STEPS="calibrate check"
# TWIN_SHIP_FEWER_GPUS="", then one call per smaller count with TWIN_GPU_STEPS=none TWIN_SHIP_FEWER_GPUS=N.
set -uo pipefail
cd "$(dirname "$0")/../.."
export OUT="${OUT:-out/gpu-ship}" NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
mkdir -p "$OUT"
bash tests/gpu/run.sh; status=$?

twin=build-carry/twin; [ -x "$twin" ] || twin=build-device/twin
[ -x build-carry/twin ] && export LD_LIBRARY_PATH="$PWD/build-carry/lib:${LD_LIBRARY_PATH:-}"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -oE 'H[0-9]+' | tr 'A-Z' 'a-z')
count=$(nvidia-smi -L | wc -l)
[ -f "$OUT/profile.json" ] && cp "$OUT/profile.json" "$OUT/$gpu-x$count.json"
for gpus in ${TWIN_SHIP_FEWER_GPUS:-2 1}; do
  [ "$gpus" -lt "$count" ] || continue
  SECONDS=0
  "$twin" calibrate --gpus "$gpus" --out "$OUT/$gpu-x$gpus.json" > "$OUT/calibrate-x$gpus.log" 2>&1
  rc=$?; [ "$rc" -eq 0 ] || status=1
  echo "calibrate --gpus $gpus: ${SECONDS}s wall, exit $rc"
done
(cd "$OUT" && tar czf logs.tar.gz --remove-files $(ls *.log check.csv 2>/dev/null | grep -v '^run.log$') profile.json)
ls -la "$OUT"
exit $status
