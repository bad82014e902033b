#!/usr/bin/env bash
# Issues 37 (item 5) and 43 (item 4): how much a collective and the compute beside it slow each other, measured pair
# by pair (every calibrated collective kind at three sizes beside six GEMMs and a memory-bound add) into the provenance
# of a profile that lacks them (`twin calibrate --collectives --profile P --out Q`: added with the host's grouped GEMM
# issue time, every other entry as it was), then checked against the profile's own collective tables and the GPU's
# peaks (tests/gpu/interference_check.py).
# $OUT: the profile, calibrate-collectives.log, interference-check.md.
# Usage (device, two or more GPUs): bash tests/gpu/interference_device.sh BIN_DIR PROFILE_JSON
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="$1"; profile="$2"
OUT="${OUT:-out/interference}"
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
"$bin/twin" calibrate --collectives --profile "$profile" --out "$OUT/$(basename "$profile")" \
  > "$OUT/calibrate-collectives.log" 2>&1 || { tail -30 "$OUT/calibrate-collectives.log"; exit 1; }
grep -E "overlap|wrote" "$OUT/calibrate-collectives.log" || true
python3 tests/gpu/interference_check.py "$OUT/$(basename "$profile")" | tee "$OUT/interference-check.md"
