#!/usr/bin/env bash
# The device check of an expert capacity in twin execute (Megatron's --moe-expert-capacity-factor, drop policy
# "probs", with and without --moe-pad-expert-input-to-capacity), from the repository root with the binaries in $1
# (twin-gpu, test_gpu and lib/ as tests/gpu/make_carry.sh packs them):
#   1. the MoE kernels' GPU tests against their references, the capacity's layout, dispatch, combine and combine
#      backward among them (test_gpu.log);
#   2. scenarios/exec-mixtral-capacity-small-1xH200.json (capacity 1.0), its padded variant, a capacity of 1.25 and
#      its dropless variant (written to $OUT), each simulated with the shipped profile (blind) and its best plan run ITERS steps
#      (tests/gpu/moe_shapes_device.sh): summary.md; dropped.md, the share of routed copies each run dropped per
#      layer and micro-batch (from rank 0's routed copies per expert, measured/*.json, and the capacity), and its
#      experts' GEMMs by role; repriced.md, each run priced again with its own routing
#      (tests/gpu/reprice_measured_routing.py).
# Usage (device): OUT=DIR bash tests/gpu/expert_capacity_device.sh BIN
set -uo pipefail
bin="$(cd "$1" && pwd)"
OUT="${OUT:-out/expert-capacity}"
mkdir -p "$OUT"
source=scenarios/exec-mixtral-capacity-small-1xH200.json
moe='{"num_experts": 8, "top_k": 2, "ffn_hidden_size": 5632'
padded="$OUT/exec-mixtral-capacity-padded-small-1xH200.json"
wider="$OUT/exec-mixtral-capacity125-small-1xH200.json"
dropless="$OUT/exec-mixtral-dropless-small-1xH200.json"
python3 tests/gpu/scenario_variant.py "$source" "$padded" "; padded to the capacity" \
  "{\"moe\": $moe, \"expert_capacity_factor\": 1.0, \"pad_expert_input_to_capacity\": true}}"
python3 tests/gpu/scenario_variant.py "$source" "$wider" "; capacity 1.25" \
  "{\"moe\": $moe, \"expert_capacity_factor\": 1.25}}"
python3 tests/gpu/scenario_variant.py "$source" "$dropless" "; dropless" "{\"moe\": $moe}}"
scenarios=("$source" "$padded" "$wider" "$dropless")
status=0
TESTS="${TESTS:-*KernelMoe*}" ITERS="${ITERS:-40}" OUT="$OUT" bash tests/gpu/moe_shapes_device.sh "$bin" \
  "${scenarios[@]}" || status=1
python3 - "$OUT" "${scenarios[@]}" > "$OUT/dropped.md" <<'PY' || status=1
import glob, json, math, os, sys
out = sys.argv[1]
print("| run | capacity | copies per micro-batch and layer | dropped, mean over layers and steps | dropped, max |")
print("| --- | --- | --- | --- | --- |")
for scenario in sys.argv[2:]:
    name = os.path.basename(scenario)[:-5]
    moe = json.load(open(scenario))["model"]["moe"]
    rank0 = sorted(glob.glob(f"/tmp/moe-shapes/{name}/measured/*.json"))[0]  # moe_shapes_device.sh's run folder
    loads = json.load(open(rank0))["expert_loads"]["tokens_per_expert"]
    factor = moe.get("expert_capacity_factor")
    shares = []
    for counts in loads:
        copies = sum(counts)
        capacity = min(math.ceil(copies / len(counts) * factor), copies // moe["top_k"]) if factor else copies
        shares.append(sum(max(0, c - capacity) for c in counts) / copies)
    cap = f"{factor} ({capacity} copies)" if factor else "dropless"
    print(f"| {name} | {cap} | {copies} | {100 * sum(shares) / len(shares):.2f}% | {100 * max(shares):.2f}% |")
PY
for scenario in "${scenarios[@]}"; do
  name=$(basename "$scenario" .json)
  echo "### $name: experts and router (rank 0, ms per step)"
  python3 tests/gpu/ops_by_role.py "$OUT/$name/ops.csv" expert_fc1 expert_fc2 router || status=1
  echo
done >> "$OUT/dropped.md" 2>&1
runs=()
for scenario in "${scenarios[@]}"; do runs+=("/tmp/moe-shapes/$(basename "$scenario" .json)"); done  # their folders
python3 tests/gpu/reprice_measured_routing.py "$bin/twin-gpu" "${runs[@]}" > "$OUT/repriced.md" || status=1
exit $status
