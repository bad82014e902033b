#!/usr/bin/env bash
# Held-out windows for the windowed-attention price (cost/attention_waves.hpp: a windowed op without windowed shapes
# in the profile is the whole kernel's price times the tiles the window keeps), from the repository root with the
# binaries in $1: scenarios/exec-gptoss-sinks-small-1xH200.json with every layer windowed (window_attn_skip_freq 0)
# at each of WINDOWS (default 512 and 2048 keys of 8,192), written to $OUT, each simulated with the shipped profile
# and its best plan run ITERS steps (tests/gpu/moe_shapes_device.sh, no GPU tests): summary.md, and attention.md with
# each run's attention ops CUPTI-measured beside the price.
# Usage (device): OUT=DIR bash tests/gpu/window_pricing_device.sh BIN
set -uo pipefail
bin="$(cd "$1" && pwd)"
OUT="${OUT:-out/window-pricing}"
mkdir -p "$OUT"
scenarios=()
for window in ${WINDOWS:-512 2048}; do
  path="$OUT/exec-gptoss-window$window-small-1xH200.json"
  python3 tests/gpu/scenario_variant.py scenarios/exec-gptoss-sinks-small-1xH200.json "$path" \
    "; every layer a window of $window keys" "{\"window_size\": $window, \"window_attn_skip_freq\": 0}"
  scenarios+=("$path")
done
status=0
TESTS="${TESTS:-NoGpuTest.ThisCallRunsNone}" ITERS="${ITERS:-20}" OUT="$OUT" bash tests/gpu/moe_shapes_device.sh "$bin" "${scenarios[@]}" || status=1
for scenario in "${scenarios[@]}"; do
  name=$(basename "$scenario" .json)
  echo "### $name: attention ops (rank 0, ms per step)"
  python3 tests/gpu/ops_by_role.py "$OUT/$name/ops.csv" core_attention || status=1
  echo
done > "$OUT/attention.md" 2>&1
exit $status
