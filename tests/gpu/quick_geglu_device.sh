#!/usr/bin/env bash
# The device check of gpt-oss's GLU in twin execute (Megatron's quick GeGLU with gpt-oss's offset 1 and clamp 7), from
# the repository root with the binaries in $1 (twin-gpu, test_gpu and lib/ as tests/gpu/make_carry.sh packs them):
#   1. the GPU tests of the quick GeGLU kernels against their float64 reference and the activation entry: test_gpu.log;
#   2. scenarios/exec-gptoss-sinks-small-1xH200.json with its dense MLP as gpt-oss's GLU, and
#      scenarios/exec-qwen3-moe-small-1xH200.json with its experts' (both written to $OUT), each simulated with the
#      shipped profile (blind) and its best plan run ITERS steps (tests/gpu/moe_shapes_device.sh): summary.md;
#   3. activation.md: each run's activation ops, CUPTI-measured beside the price.
# Usage (device): OUT=DIR bash tests/gpu/quick_geglu_device.sh BIN
set -uo pipefail
bin="$(cd "$1" && pwd)"
OUT="${OUT:-out/quick-geglu}"
mkdir -p "$OUT"
scenarios=()
for base in exec-gptoss-sinks-small-1xH200 exec-qwen3-moe-small-1xH200; do
  path="$OUT/${base/-small/-quickgeglu-small}.json"
  python3 tests/gpu/scenario_variant.py "scenarios/$base.json" "$path" \
    "; the MLP as gpt-oss's GLU (quick GeGLU, offset 1, clamp 7)" \
    '{"activation": "quick_geglu", "glu_linear_offset": 1, "activation_func_clamp_value": 7}'
  scenarios+=("$path")
done
status=0
TESTS="${TESTS:-*QuickGeglu*:KernelArchitectures.ActivationEntryRunsTheNamedKernel}" ITERS="${ITERS:-33}" OUT="$OUT" \
  bash tests/gpu/moe_shapes_device.sh "$bin" "${scenarios[@]}" || status=1
for scenario in "${scenarios[@]}"; do
  name=$(basename "$scenario" .json)
  echo "### $name: activation ops (rank 0, ms per step)"
  python3 tests/gpu/ops_by_role.py "$OUT/$name/ops.csv" activation expert_activation || status=1
  echo
done > "$OUT/activation.md" 2>&1
exit $status
