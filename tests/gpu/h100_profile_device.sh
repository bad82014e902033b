#!/usr/bin/env bash
# One H100, two steps of one study (issue 37 items 1 and 3): `blind` runs the one-H100 blind studies, planned with
# the shipped h100-x1 before anything is measured on this machine (Qwen2.5-7B and Phi-3-mini widths, shapes no
# shipped profile was folded on); `calibrate` then calibrates this GPU afresh (`twin calibrate`, the sustained-clock
# curve included) and checks that profile on shapes it did not measure (`twin calibrate --check`). The runs are
# re-predicted with the fresh profile on the development machine (tools/repredict_runs.py): the profile a user gets
# by calibrating the machine, against the shipped one.
# $OUT: blind/ (tests/gpu/blind_study.sh's archives and logs), calibrate.log, h100-fresh.json, check.log, check/,
# gpu_clocks.csv (nvidia-smi every 200 ms during calibration).
# Usage (device): bash tests/gpu/h100_profile_device.sh BIN_DIR STEP...   (STEP: blind, calibrate)
set -uo pipefail
cd "$(dirname "$0")/../.."
bin="$1"; shift
OUT="${OUT:-out/h100-profile}"
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
status=0
for step in "$@"; do
  case "$step" in
    blind)
      TWIN="$bin/twin" OUT="$OUT/blind" TWIN_STUDY_BUDGET_S="${TWIN_STUDY_BUDGET_S:-150}" \
        TWIN_STUDY_ITERS="${TWIN_STUDY_ITERS:-9}" bash tests/gpu/blind_study.sh \
        scenarios/accuracy-qwen25-7b-widths-1xH100.json:h100-x1 \
        scenarios/accuracy-phi3-mini-widths-1xH100.json:h100-x1 || status=1 ;;
    calibrate)
      nvidia-smi --query-gpu=index,timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active \
        --format=csv -lms 200 > "$OUT/gpu_clocks.csv" 2>/dev/null &
      logger=$!
      SECONDS=0
      "$bin/twin" calibrate --out "$OUT/h100-fresh.json" > "$OUT/calibrate.log" 2>&1 || status=1
      echo "calibrate: ${SECONDS}s wall"; tail -5 "$OUT/calibrate.log"
      SECONDS=0
      "$bin/twin" calibrate --check "$OUT/h100-fresh.json" --check-out "$OUT/check" > "$OUT/check.log" 2>&1 || status=1
      echo "check: ${SECONDS}s wall"; tail -8 "$OUT/check.log"
      kill "$logger" 2>/dev/null ;;
    *) echo "unknown step $step (blind, calibrate)"; status=1 ;;
  esac
done
exit $status
