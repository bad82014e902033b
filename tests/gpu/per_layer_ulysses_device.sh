#!/usr/bin/env bash
# The device check of issue 42 item 4's Ulysses edges (docs/EXECUTOR.md "Per-layer plans"), with the binaries in $1
# (twin-gpu, test_gpu and lib/ as tests/gpu/make_carry.sh packs them) on two GPUs:
#   1. test_gpu's PerLayerUlyssesEdge.* (tests/gpu/per_layer_ulysses_edge_test.cpp): a per-layer plan whose embedding
#      and output layer hold half a sample per GPU against the whole-sample run on one GPU, loss and the edge weights'
#      gradients;
#   2. SCENARIO (default scenarios/exec-llama-per-layer-ulysses-2xH200.json) simulated with its shipped profile and
#      its best plan run ITERS steps (default 20, 3 of them warm-up): the ranking's head (each plan's verdict),
#      best.json, metrics.json and steps.csv (the loss curve; measured beside predicted step time); then the plan
#      COMPARE of the same scenario (default its uniform TP 2 plan) on the same data, its metrics and loss curve.
# SANITIZE="initcheck memcheck ..." first runs step 1 under each compute-sanitizer tool named (reads of memory never
# written, out-of-bounds accesses), and step 2's plan ITERS steps under the first tool, each log in OUT.
# Usage (device): OUT=DIR bash tests/gpu/per_layer_ulysses_device.sh BIN [SCENARIO]
set -uo pipefail
bin="$(cd "$1" && pwd)"
scenario="${2:-scenarios/exec-llama-per-layer-ulysses-2xH200.json}"
OUT="${OUT:-out/per-layer-ulysses}"
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$bin/lib:${LD_LIBRARY_PATH:-}" NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
status=0
date -u +"start %FT%TZ" > "$OUT/run.log"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader >> "$OUT/run.log"
for tool in ${SANITIZE:-}; do
  timeout "${SANITIZE_TIMEOUT:-600}" compute-sanitizer --tool "$tool" --report-api-errors no --print-limit 30 "$bin/test_gpu" \
    --gtest_filter="${TESTS:-PerLayerUlyssesEdge.*}" > "$OUT/sanitize-$tool.log" 2>&1
  echo "compute-sanitizer $tool: exit $?, $(grep -c '^=========  *[A-Z]' "$OUT/sanitize-$tool.log") report lines" >> "$OUT/run.log"
done
"$bin/test_gpu" --gtest_filter="${TESTS:-PerLayerUlyssesEdge.*}" > "$OUT/test_gpu.log" 2>&1 || status=1
grep -E "^\[  (PASSED|FAILED) |tests? ran|gradient:|^loss:" "$OUT/test_gpu.log" >> "$OUT/run.log"
date -u +"tests done %FT%TZ" >> "$OUT/run.log"
run=/tmp/per-layer-ulysses
rm -rf "$run"; mkdir -p "$run"
if [ -n "${SANITIZE:-}" ]; then
  tool="${SANITIZE%% *}"
  "$bin/twin-gpu" simulate "$scenario" --out "$run" --quiet --top 0 > "$OUT/sanitize-execute.log" 2>&1
  timeout "${SANITIZE_TIMEOUT:-600}" compute-sanitizer --tool "$tool" --report-api-errors no --print-limit 30 --target-processes all \
    "$bin/twin-gpu" execute --best --run "$run" --iters 2 --warmup 0 >> "$OUT/sanitize-execute.log" 2>&1
  echo "compute-sanitizer $tool, twin execute: exit $?" >> "$OUT/run.log"
  rm -rf "$run"; mkdir -p "$run"
fi
{ "$bin/twin-gpu" simulate "$scenario" --out "$run" --quiet --top 0 &&
  "$bin/twin-gpu" execute --best --run "$run" --iters "${ITERS:-20}" --warmup 3; } > "$OUT/execute.log" 2>&1 ||
  status=1
head -n 12 "$run/ranking.csv" > "$OUT/ranking_head.csv" 2>/dev/null
# The same model and data under COMPARE (default the uniform TP 2 plan the scenario ranks second): the loss curves
# of the two layouts side by side.
compare=/tmp/per-layer-ulysses-compare
rm -rf "$compare"; mkdir -p "$compare"
{ "$bin/twin-gpu" simulate "$scenario" --out "$compare" --quiet --top 0 \
    --plan-key "${COMPARE:-tp2.pp1.cp1.ep1.dp1.vpp1.sp.mbs1.z0.rc-none.1f1b}" &&
  "$bin/twin-gpu" execute --best --run "$compare" --iters "${ITERS:-20}" --warmup 3; } > "$OUT/compare.log" 2>&1 ||
  status=1
mkdir -p "$run/compare" && cp "$compare"/metrics.json "$compare"/steps.csv "$run/compare/" 2>/dev/null
tar -C "$run" -czf "$OUT/run.tar.gz" best.json metrics.json steps.csv predicted_vs_measured.json compare 2>/dev/null
date -u +"end %FT%TZ status $status" >> "$OUT/run.log"
exit $status
