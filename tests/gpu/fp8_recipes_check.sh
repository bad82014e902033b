#!/usr/bin/env bash
# FP8 recipes against BF16 on one Hopper GPU, in one device call (issue 41 item 3): the FP8 GPU tests, then for the
# fp8_check.sh model (scenarios/llama2-7b-4layers-fp8-1xH200.json: Llama-2-7B widths, 4 layers; or BASE) with each recipe
# asked, `twin simulate` with the shipped H200 profile as it is (OUT/sim-shipped-NAME), `twin calibrate` of its ops
# into a copy of that profile, `twin simulate` with the copy and `twin execute` of the plan; then each recipe's step
# and speed-up against BF16, measured beside predicted (both profiles), and its loss curve against BF16's
# (OUT/summary.md). Exits non-zero when a run fails or a recipe's loss, mean of the last ten steps, is more than 1%
# from BF16's.
#   bash tests/gpu/fp8_recipes_check.sh BIN OUT [ITERS] [RECIPE...]
# BIN: a folder made by tests/gpu/make_carry.sh; ITERS default 60 (5 warm-up); RECIPE tensorwise, delayed,
# delayed:LEN (amax_history_len LEN; delayed alone is Megatron's default, 1) or blockwise (DeepSeek-V3's: E4M3
# everywhere, format e4m3); default "tensorwise delayed".
# GTEST_FILTER: the GPU tests run first (default: the FP8 ones and the quick kernel calibration). BASE and BF16: another
# FP8 scenario and its BF16 twin (default the Llama-2-7B-width pair; scenarios/gpt-7.5b-4layers-*-1xH200.json is a GPT
# pair, with linear biases).
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(realpath "$1"); out=$(realpath -m "$2"); iters=${3:-60}; shift $(( $# < 3 ? $# : 3 ))
recipes=("${@:-}"); [ -n "${recipes[0]}" ] || recipes=(tensorwise delayed)
mkdir -p "$out"
export CUBLASLT_LOG_LEVEL="${CUBLASLT_LOG_LEVEL:-1}"
source "$repo/tests/gpu/logged_steps.sh"
step test_gpu "$bin/test_gpu" --gtest_filter="${GTEST_FILTER:-*Fp8*:KernelCalibration.MeasuresEveryKind*}"
grep -hE "\[kernel-error\]|^\[  (PASSED|FAILED)" "$out/test_gpu.log"
profile=$out/h200-fp8.json
cp "$repo/cost/profiles/h200-x1.json" "$profile"
base=$(realpath "${BASE:-$repo/scenarios/llama2-7b-4layers-fp8-1xH200.json}")
plans=(bf16)
cp "${BF16:-$repo/scenarios/llama2-7b-4layers-bf16-1xH200.json}" "$out/scenario-bf16.json"
for recipe in "${recipes[@]}"; do
  name=${recipe/:/-}
  python3 - "$base" "$recipe" "$out/scenario-$name.json" <<'PY' || status=1
import json, sys
scenario = json.load(open(sys.argv[1]))
recipe, _, history = sys.argv[2].partition(":")
fp8 = scenario["training"]["fp8"]
fp8["recipe"] = recipe
if recipe == "blockwise":
    fp8["format"] = "e4m3"
if history:
    fp8["amax_history_len"] = int(history)
scenario["name"] += f"; FP8 {fp8['format']} {sys.argv[2]} (tests/gpu/fp8_recipes_check.sh)"
json.dump(scenario, open(sys.argv[3], "w"), indent=1)
PY
  plans+=("$name")
done
calibrated=()
for name in "${plans[@]}"; do  # before calibration touches the copy: the shipped profile's own prediction
  step simulate-shipped-$name "$bin/twin" simulate "$out/scenario-$name.json" --profile "$repo/cost/profiles/h200-x1.json" \
    --out "$out/sim-shipped-$name" --top 0 --quiet
done
for name in "${plans[@]}"; do
  kind=${name%%-*}  # delayed-1024 prices as delayed: the same ops, calibrated once
  [[ " ${calibrated[*]} " == *" $kind "* ]] && continue
  step calibrate-$name "$bin/twin" calibrate --scenario "$out/scenario-$name.json" --profile "$profile"
  calibrated+=("$kind")
done
for name in "${plans[@]}"; do
  run=$out/run-$name
  step simulate-$name "$bin/twin" simulate "$out/scenario-$name.json" --profile "$profile" --out "$run" --top 0 --quiet
  step execute-$name "$bin/twin" execute --plan "$run/best.json" --run "$run" --iters "$iters" --warmup 5
done
python3 "$repo/tests/gpu/fp8_summary.py" "$out" "${plans[@]}" | tee "$out/summary.md"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
date -u
exit $status
