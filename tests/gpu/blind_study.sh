#!/usr/bin/env bash
# Blind accuracy studies on the device machine (issue 37 item 3): each SCENARIO[:PROFILE[:RUNS]] is planned with
# the shipped profile (no calibration, no fold: widths that no shipped profile was folded on), its strategies
# executed (tests/gpu/accuracy_study.py --phase run), and each run's NCCL kernels kept per rank
# (tests/gpu/nccl_kernels_extract.py) for the arrival-skew analysis. nvidia-smi logs every GPU every 100 ms.
# $OUT: <name>-work.tar.gz (the study folder without traces), <name>-nccl.tar.gz, gpu_clocks.csv, <name>.log.
# Usage (device): TWIN=bin/twin TWIN_STUDY_BUDGET_S=250 TWIN_STUDY_ITERS=9 bash tests/gpu/blind_study.sh S[:P[:N]] ...
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-out/blind-study}"
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}" PYTHONUNBUFFERED=1
twin="${TWIN:-build-carry/twin}"
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv,noheader
nvidia-smi --query-gpu=index,timestamp,clocks.sm,power.draw,utilization.gpu,temperature.gpu \
  --format=csv,noheader,nounits -lms 100 > "$OUT/gpu_clocks.csv" 2>/dev/null &
logger=$!
trap 'kill $logger 2>/dev/null' EXIT
status=0
for study in "$@"; do
  IFS=: read -r scenario profile runs <<< "$study"
  name="$(basename "$scenario" .json)"; work="out/$name-work"
  echo "=== blind study $scenario with ${profile:-h200-x4} ($(date -u +%H:%M:%S))"
  python3 tests/gpu/accuracy_study.py --twin "$twin" --phase run --scenario "$scenario" --profile "${profile:-h200-x4}" \
    --work "$work" --pack "$OUT/$name-work.tar.gz" --budget-s "${TWIN_STUDY_BUDGET_S:-250}" \
    --iters "${TWIN_STUDY_ITERS:-9}" ${runs:+--only "$runs"} > "$OUT/$name.log" 2>&1 || status=1
  grep -E "exit|budget" "$OUT/$name.log" | tail -20
  python3 tests/gpu/nccl_kernels_extract.py "$work"/runs/* | tail -3
  tar -czf "$OUT/$name-nccl.tar.gz" "$work"/runs/*/nccl_kernels.csv.gz 2>/dev/null || status=1
done
echo "=== end ($(date -u +%H:%M:%S)), status $status"
exit $status
