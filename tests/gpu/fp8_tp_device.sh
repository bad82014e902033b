#!/usr/bin/env bash
# FP8 over several GPUs on two Hopper GPUs, in one device call (issue 41): the GPU tests of the amax reduction and
# the FP8 kernels, then `twin simulate` (shipped h200-x2 / h200-x1 profiles) and `twin execute` of
# scenarios/exec-llama2-7b-4layers-fp8-tp2-2xH200.json (Llama-2-7B widths, 4 layers, TP 2 without SP, current
# scaling) and of its variants: its BF16 twin (bf16-tp2), the same model at TP 1 on one GPU in FP8 (fp8-tp1),
# delayed scaling at TP 2 (delayed-tp2: the amaxes all-reduced over TP) and at DP 2 (delayed-dp2,
# beside bf16-dp2), and block-wise scaling at TP 2 (blockwise-tp2: E4M3 with 1x128 and 128x128 scales, each TP rank
# its own shards' blocks), and TP 2 with sequence parallelism (bf16-tp2-sp, fp8-tp2-sp, delayed-tp2-sp: FP8 gathers of
# each rank's rows, one scale per tensor). OUT/summary.md: each plan's measured and predicted step, the FP8 speed-ups measured beside
# predicted, and the loss checks (tests/gpu/fp8_tp_summary.py); exits non-zero when a run fails or a check does.
#   [FP8_PLANS="bf16-tp2-sp fp8-tp2-sp"] bash tests/gpu/fp8_tp_device.sh BIN OUT [ITERS]
# BIN: a folder made by tests/gpu/make_carry.sh; ITERS default 80 (5 warm-up): the loss checks need the steps after the
# noisy first phase (at 25-30 steps every pair, BF16 at TP 2 against DP 2 too, parts by several percent).
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(realpath "$1"); out=$(realpath -m "$2"); iters=${3:-80}
mkdir -p "$out"
source "$repo/tests/gpu/logged_steps.sh"
step test_gpu "$bin/test_gpu" \
  --gtest_filter="${GTEST_FILTER:-*Fp8AmaxReduction*:*Fp8Delayed*:*Fp8Linear*:*Fp8Cast*:*Fp8Matmul*}"
grep -hE "^\[  (PASSED|FAILED|SKIPPED)|^\[       OK \] .*Amax" "$out/test_gpu.log"
base=$repo/scenarios/exec-llama2-7b-4layers-fp8-tp2-2xH200.json
# FP8_PLANS: a space-separated subset to run (the summary checks those and the pairs among them).
read -ra plans <<< "${FP8_PLANS:-fp8-tp1 bf16-tp2 fp8-tp2 delayed-tp2 bf16-dp2 delayed-dp2 blockwise-tp2 bf16-tp2-sp fp8-tp2-sp delayed-tp2-sp}"
export FP8_PLANS="${plans[*]}"
for name in "${plans[@]}"; do
  python3 - "$base" "$name" "$out/scenario-$name.json" <<'PY' || status=1
import json, sys
scenario = json.load(open(sys.argv[1]))
precision, _, layout = sys.argv[2].partition("-")
strategy, training = scenario["strategy"], scenario["training"]
if layout.endswith("-sp"):  # sequence parallelism: each TP rank's rows cast and gathered
    strategy["sequence_parallel"] = True
    layout = layout[:-3]
if precision == "bf16":
    del training["fp8"]
else:
    training["fp8"]["recipe"] = "tensorwise" if precision == "fp8" else precision
    if precision == "blockwise":  # DeepSeek-V3's and TE's Float8BlockScaling: E4M3 in every GEMM
        training["fp8"]["format"] = "e4m3"
if layout == "tp1":  # one GPU of the two, the same model and data
    scenario["cluster"]["nodes"][0]["gpus_per_node"] = 1
    strategy["tensor_model_parallel_size"] = 1
    scenario["profile"] = "h200-x1"
elif layout == "dp2":
    strategy["tensor_model_parallel_size"] = 1
    strategy["data_parallel_size"] = 2
scenario["name"] = f"llama2-7b widths, 4 layers, {sys.argv[2]} (tests/gpu/fp8_tp_device.sh)"
json.dump(scenario, open(sys.argv[3], "w"), indent=1)
PY
done
for name in "${plans[@]}"; do
  run=$out/run-$name
  step simulate-$name "$bin/twin" simulate "$out/scenario-$name.json" --out "$run" --top 0 --quiet
  [ -f "$run/best.json" ] || continue
  step execute-$name "$bin/twin" execute --plan "$run/best.json" --run "$run" --iters "$iters" --warmup 5
done
python3 "$repo/tests/gpu/fp8_tp_summary.py" "$out" | tee "$out/summary.md"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
date -u
exit $status
