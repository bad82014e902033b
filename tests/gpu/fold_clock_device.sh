#!/usr/bin/env bash
# The device half of the fold-clock study (issue 37 item 3, docs/ACCURACY.md "A fold on one H100 no longer makes its
# predictions worse"): a fresh calibration, whose sustained-clock curves record NVML's clock beside the probe's at each
# duty (nvml_sm_clock_MHz), then blind studies of SCENARIO[:PROFILE[:RUNS]] (tests/gpu/blind_study.sh) whose runs a fold
# can be tried on. Everything lands in one archive, $OUT/fold-clock.tar.gz (a device call returns at most 8 files).
# The host half: tools/one_h200_studies.py OUT fold-clock-h100, then tools/fold_transfer_study.py over the studies.
# TWIN_CURVE_PROFILE=P first measures P's sustained-clock curve again (twin calibrate --sustained-clock), so that a
# shipped profile's points gain NVML's clock; TWIN_SKIP_CALIBRATE=1 leaves out the full calibration.
# Usage (device): TWIN=build-carry/twin TWIN_STUDY_BUDGET_S=170 bash tests/gpu/fold_clock_device.sh S[:P[:N]] ...
set -uo pipefail
cd "$(dirname "$0")/../.."
twin="${TWIN:-build-carry/twin}"
results="$(mktemp -d)/fold-clock"
mkdir -p "$results/calibrate" "$results/blind"
export NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}" PYTHONUNBUFFERED=1
pack() { tar -czf "$OUT/fold-clock.tar.gz" -C "$(dirname "$results")" fold-clock; }
trap pack EXIT
if [ -n "${TWIN_CURVE_PROFILE:-}" ]; then  # the shipped profile's curve measured again: its points gain NVML's clock
  echo "=== sustained clock of $TWIN_CURVE_PROFILE ($(date -u +%H:%M:%S))"
  timeout 120 "$twin" calibrate --sustained-clock --profile "$TWIN_CURVE_PROFILE" \
    --out "$results/calibrate/$(basename "$TWIN_CURVE_PROFILE")" > "$results/calibrate/sustained-clock.log" 2>&1
  echo "sustained clock exit $? ($(date -u +%H:%M:%S))"
  tail -12 "$results/calibrate/sustained-clock.log"
fi
if [ -z "${TWIN_SKIP_CALIBRATE:-}" ]; then
  echo "=== calibrate ($(date -u +%H:%M:%S))"
  timeout "${TWIN_CALIBRATE_TIMEOUT_S:-150}" "$twin" calibrate --out "$results/calibrate/profile.json" \
    > "$results/calibrate/calibrate.log" 2>&1
  echo "calibrate exit $? ($(date -u +%H:%M:%S))"
  grep -iE "sustained clock|duty" "$results/calibrate/calibrate.log" | tail -12
fi
[ $# -eq 0 ] && exit 0
OUT="$results/blind" TWIN="$twin" timeout "${TWIN_BLIND_TIMEOUT_S:-400}" bash tests/gpu/blind_study.sh "$@" \
  2>&1 | tee "$results/blind/blind.log"
echo "=== end ($(date -u +%H:%M:%S))"
