#!/usr/bin/env bash
# The clock a training step holds (issue 37), in one device call on four GPUs:
#  1. `twin calibrate --quick --gpus 1`: GEMM timings with their clock probes (cycles / CUPTI span), beside
#     nvidia-smi's reported SM clock, so that the two ways of reading the clock can be compared;
#  2. a blind accuracy study (tests/gpu/accuracy_study.py --phase run) of a scenario whose widths no shipped
#     profile was folded on, each run recording the median SM clock and power of its busy GPUs.
# Everything under $OUT: gpu_clocks.csv (every GPU every 100 ms, the whole call), calibrate.log, quick.json and
# each study's log and work folder. Analysis on the development machine: tests/gpu/clock_analysis.py.
# Usage (device): TWIN=build-carry/twin bash tests/gpu/clock_study.sh [SCENARIO[:PROFILE] ...]
# (default: scenarios/accuracy-llama2-13b-4xH100.json:h100-x1); each study's work folder is packed as
# $OUT/<scenario name>-work.tar.gz, its log $OUT/<scenario name>.log; TWIN_STUDY_BUDGET_S bounds each study.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-out/clock-study}"
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}" PYTHONUNBUFFERED=1
twin="${TWIN:-build-carry/twin}"
[ -d "$(dirname "$twin")/lib" ] && export LD_LIBRARY_PATH="$PWD/$(dirname "$twin")/lib:${LD_LIBRARY_PATH:-}"
[ $# -gt 0 ] || set -- scenarios/accuracy-llama2-13b-4xH100.json:h100-x1
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv,noheader
nvidia-smi --query-gpu=index,timestamp,clocks.sm,power.draw,utilization.gpu,temperature.gpu \
  --format=csv,noheader,nounits -lms 100 > "$OUT/gpu_clocks.csv" 2>/dev/null &
logger=$!
trap 'kill $logger 2>/dev/null' EXIT
status=0
echo "=== calibrate --quick ($(date -u +%H:%M:%S))"
timeout 170 "$twin" calibrate --quick --gpus 1 --out "$OUT/quick.json" > "$OUT/calibrate.log" 2>&1 || status=1
tail -1 "$OUT/calibrate.log"
for study in "$@"; do
  scenario="${study%%:*}"; profile="h100-x1"; [[ "$study" == *:* ]] && profile="${study#*:}"
  name="$(basename "$scenario" .json)"
  echo "=== blind study $scenario with $profile ($(date -u +%H:%M:%S))"
  python3 tests/gpu/accuracy_study.py --twin "$twin" --phase run --scenario "$scenario" --profile "$profile" \
    --work "out/$name-work" --pack "$OUT/$name-work.tar.gz" --budget-s "${TWIN_STUDY_BUDGET_S:-330}" \
    > "$OUT/$name.log" 2>&1 || status=1
  grep -E "exit|budget" "$OUT/$name.log" | tail -20
done
echo "=== end ($(date -u +%H:%M:%S)), status $status"
exit $status
