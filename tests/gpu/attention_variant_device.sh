#!/usr/bin/env bash
# What the device checks of an attention variant share (tests/gpu/attention_softcap_device.sh,
# attention_sinks_device.sh), from the repository root with the binaries in $1: the GPU tests named by TESTS, the
# scenario with the variant ($2) and without it ($3) each simulated with the shipped profile (blind) and its best plan
# run ITERS steps (tests/gpu/moe_shapes_device.sh: summary.md); attention.md, each run's attention ops CUPTI-measured
# beside the price; and twin calibrate --scenario of $2 over h200-x1 into $OUT/$4 with its attention keys in keys.txt,
# so that the run can be re-predicted off the machine.
# Usage (device): OUT=DIR TESTS=FILTER bash tests/gpu/attention_variant_device.sh BIN WITH WITHOUT PROFILE_NAME
set -uo pipefail
bin="$(cd "$1" && pwd)"
with="$2" without="$3" profile="$4"
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$bin/lib:${LD_LIBRARY_PATH:-}" NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
status=0
TESTS="$TESTS" ITERS="${ITERS:-33}" OUT="$OUT" bash tests/gpu/moe_shapes_device.sh "$bin" "$with" "$without" || status=1
{
  for scenario in "$with" "$without"; do
    name=$(basename "$scenario" .json)
    echo "### $name: attention ops (rank 0, ms per step)"
    python3 tests/gpu/ops_by_role.py "$OUT/$name/ops.csv" core_attention || status=1
    echo
  done
} > "$OUT/attention.md" 2>&1
date -u +"ops done %FT%TZ" >> "$OUT/run.log"
timeout "${CAL_TIMEOUT:-150}" "$bin/twin-gpu" calibrate --scenario "$with" --profile h200-x1 \
  --out "$OUT/$profile" > "$OUT/calibrate.log" 2>&1 || status=1
python3 - "$OUT/$profile" > "$OUT/keys.txt" 2>&1 <<'PY' || status=1
import json, sys
profile = json.load(open(sys.argv[1]))
for gpu in profile["gpus"]:
    measured = gpu.get("measured", {})
    for key in sorted(measured):
        if key.startswith("attention_"):
            print(gpu.get("gpu", "?"), key, measured[key]["median_ns"])
PY
date -u +"end %FT%TZ status $status" >> "$OUT/run.log"
exit $status
