#!/usr/bin/env bash
# The kernels changed on 2026-12-02, measured into `h200-x1` where its entries no longer price what runs, and the
# bias-epilogue helper's callers run again, from the repository root with the binaries in $1 (tests/gpu/make_carry.sh):
#   1. block-wise FP8 weight gradients (GemmInputs::fp8_blockwise_1d, which the profile lacks): the block-wise variants
#      of scenarios/llama2-7b-4layers-fp8-1xH200.json and gpt-7.5b-4layers-fp8-1xH200.json calibrated into it
#      (tests/gpu/profile_increment.sh): $OUT/blockwise/profile.json;
#   2. the MoE permutes (their kernels take padding rows and dropped copies since then): a copy of the profile without
#      its moe_permute / moe_unpermute entries, the Qwen3-MoE-shaped scenario calibrated into it: $OUT/permutes/;
#   3. the router's and the FP8 linears' biases through gpu/bias_epilogue.hpp: the MoE, FP8 and bias GPU tests, the
#      gpt-oss-shaped model (biased router) and the GPT-7.5B-width FP8 plan (biased linears) run ITERS steps.
# Usage (device): OUT=DIR bash tests/gpu/profile_refresh_device.sh BIN
set -uo pipefail
bin="$(cd "$1" && pwd)"
OUT="${OUT:-out/profile-refresh}"
mkdir -p "$OUT/scenarios"
status=0
for base in llama2-7b-4layers-fp8-1xH200 gpt-7.5b-4layers-fp8-1xH200; do
  python3 - "scenarios/$base.json" "$OUT/scenarios/$base-blockwise.json" <<'PY' || status=1
import json, sys
scenario = json.load(open(sys.argv[1]))
scenario["training"]["fp8"].update({"recipe": "blockwise", "format": "e4m3"})
scenario["name"] += "; block-wise FP8, E4M3 (tests/gpu/profile_refresh_device.sh)"
json.dump(scenario, open(sys.argv[2], "w"), indent=1)
PY
done
bash tests/gpu/profile_increment.sh "$bin" cost/profiles/h200-x1.json "$OUT/blockwise" \
  "$OUT"/scenarios/*-blockwise.json || status=1
python3 - cost/profiles/h200-x1.json "$OUT/permutes-before.json" <<'PY' || status=1
import json, sys
profile = json.load(open(sys.argv[1]))
measured = profile["gpus"][0]["measured"]
for key in [k for k in measured if k.startswith(("moe_permute:", "moe_unpermute:"))]:
    del measured[key]
json.dump(profile, open(sys.argv[2], "w"))
PY
bash tests/gpu/profile_increment.sh "$bin" "$OUT/permutes-before.json" "$OUT/permutes" \
  scenarios/exec-qwen3-moe-small-1xH200.json || status=1
TESTS="${TESTS:-*KernelMoe*:*Fp8Matmul*:*KernelBias*:*GroupedMatmul*}" ITERS="${ITERS:-20}" OUT="$OUT/runs" \
  bash tests/gpu/moe_shapes_device.sh "$bin" scenarios/exec-gptoss-moe-small-1xH200.json \
  scenarios/gpt-7.5b-4layers-fp8-1xH200.json || status=1
exit $status
