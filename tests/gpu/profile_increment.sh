#!/usr/bin/env bash
# Adds to a shipped profile the shapes of some scenarios that it lacks, measured on this machine: `twin calibrate
# --scenario S --profile P` for each scenario in turn (each step's output the next step's profile), every other entry
# as it was. Used for the FP8 GEMMs `h200-x2` lacked (docs/ACCURACY.md "Block-wise FP8 at TP 2").
# Usage (device): bash tests/gpu/profile_increment.sh BIN PROFILE OUT SCENARIO...   -> OUT/profile.json, OUT/*.log
set -uo pipefail
bin=$(realpath "$1"); profile=$(realpath "$2"); out=$(realpath -m "$3"); shift 3
mkdir -p "$out"
export LD_LIBRARY_PATH=$bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
current=$profile
i=0
for scenario in "$@"; do
  i=$((i + 1))
  SECONDS=0
  "$bin/twin-gpu" calibrate --scenario "$scenario" --profile "$current" --out "$out/step$i.json" > "$out/step$i.log" 2>&1
  rc=$?
  echo "step $i ($(basename "$scenario")): exit $rc, ${SECONDS}s"
  [ $rc -eq 0 ] || exit 1
  current=$out/step$i.json
done
cp "$current" "$out/profile.json"
