#!/usr/bin/env bash
# One H100, two steps of one study (issue 37 items 1 and 3): `blind` runs the one-H100 blind studies, planned with
# the shipped h100-x1 before anything is measured on this machine (Qwen2.5-7B and Phi-3-mini widths, shapes no
# shipped profile was folded on); `calibrate` then calibrates this GPU afresh and checks that profile on shapes it
# did not measure: tests/gpu/run.sh's `calibrate` and `check` steps (the sustained-clock curve included; nvidia-smi
# every 200 ms, to tell whether the clock probe or the GEMMs' cycles read the full-duty clock right). The runs are
# re-predicted with the fresh profile on the development machine (tools/repredict_runs.py): the profile a user gets
# by calibrating the machine, against the shipped one.
# $OUT: blind/ (tests/gpu/blind_study.sh's archives and logs) and run.sh's outputs (profile.json, calibrate.log,
# check.log, check.md, gpu_clocks.csv).
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
      # run.sh takes its binaries from build-carry/: these, unless the tree already has one.
      [ -e build-carry ] || ln -s "$(cd "$bin" && pwd)" build-carry
      OUT="$OUT" TWIN_GPU_STEPS="calibrate check" bash tests/gpu/run.sh || status=1 ;;
    *) echo "unknown step $step (blind, calibrate)"; status=1 ;;
  esac
done
exit $status
