#!/usr/bin/env bash
# The device check of experts' and routers' biases in twin execute (gpt-oss; Megatron's add_bias_linear in MoE layers),
# from the repository root with the binaries in $1 (twin-gpu, test_gpu and lib/ as tests/gpu/make_carry.sh packs them):
#   1. the grouped GEMMs' GPU tests against their float64 reference, the biased ones among them (epilogue and
#      kernels), and the bias kernels': test_gpu.log;
#   2. scenarios/exec-gptoss-moe-small-1xH200.json (gpt-oss-20b's widths: sinks, windows, its GLU, biases everywhere)
#      and scenarios/exec-deepseek-v3-nomla-small-1xH200.json with add_bias_linear (written to $OUT: a shared expert
#      and a dense first layer with biases, a sigmoid router with one), each simulated with the shipped profile
#      (blind) and its best plan run ITERS steps (tests/gpu/moe_shapes_device.sh): summary.md;
#   3. experts.md: each run's expert GEMMs and router, CUPTI-measured beside the price.
# Usage (device): OUT=DIR bash tests/gpu/expert_biases_device.sh BIN
set -uo pipefail
bin="$(cd "$1" && pwd)"
OUT="${OUT:-out/expert-biases}"
mkdir -p "$OUT"
biased="$OUT/exec-deepseek-v3-nomla-biased-small-1xH200.json"
python3 - scenarios/exec-deepseek-v3-nomla-small-1xH200.json "$biased" <<'PY'
import json, sys
scenario = json.load(open(sys.argv[1]))
scenario["model"]["add_bias_linear"] = True
scenario["model"]["name"] += "-biased"
scenario["name"] += "; with linear biases everywhere (add_bias_linear)"
json.dump(scenario, open(sys.argv[2], "w"), indent=2)
PY
scenarios=(scenarios/exec-gptoss-moe-small-1xH200.json "$biased")
status=0
TESTS="${TESTS:-*GroupedMatmul*:*KernelBias*:*MatmulEpilogues*:*Matmul.*:*KernelMoe*}" ITERS="${ITERS:-33}" OUT="$OUT" \
  bash tests/gpu/moe_shapes_device.sh "$bin" "${scenarios[@]}" || status=1
for scenario in "${scenarios[@]}"; do
  name=$(basename "$scenario" .json)
  echo "### $name: experts and router (rank 0, ms per step)"
  python3 tests/gpu/ops_by_role.py "$OUT/$name/ops.csv" expert_fc1 expert_fc2 router || status=1
  echo
done > "$OUT/experts.md" 2>&1
exit $status
