#!/usr/bin/env bash
# The device check of experts' and routers' biases in twin execute (gpt-oss; Megatron's add_bias_linear in MoE layers),
# from the repository root with the binaries in $1 (twin-gpu, test_gpu and lib/ as tests/gpu/make_carry.sh packs them):
#   1. the grouped GEMMs' GPU tests against their float64 reference, the biased ones among them (epilogue and
#      kernels), the bias kernels' and the GEMM epilogues': test_gpu.log;
#   2. scenarios/exec-gptoss-moe-small-1xH200.json (gpt-oss-20b's widths: sinks, windows, its GLU, biases everywhere)
#      and scenarios/exec-deepseek-v3-nomla-small-1xH200.json with add_bias_linear (written to $OUT: a shared expert
#      and a dense first layer with biases), each simulated with the shipped profile (blind) and its best plan run
#      ITERS steps (tests/gpu/moe_shapes_device.sh): summary.md; experts.md, each run's expert GEMMs and router,
#      CUPTI-measured beside the price;
#   3. what the biases cost, same lease: the DeepSeek-shaped model as shipped (no biases) and
#      scenarios/gpt-small-1xH200.json with and without its biases (the variant written to $OUT), run alike:
#      bias_cost.md, each GEMM role's measured time with biases over without.
# Usage (device): OUT=DIR bash tests/gpu/expert_biases_device.sh BIN
set -uo pipefail
bin="$(cd "$1" && pwd)"
OUT="${OUT:-out/expert-biases}"
mkdir -p "$OUT"
ds_biased="$OUT/exec-deepseek-v3-nomla-biased-small-1xH200.json"
gpt_unbiased="$OUT/gpt-small-unbiased-1xH200.json"
python3 tests/gpu/scenario_variant.py scenarios/exec-deepseek-v3-nomla-small-1xH200.json "$ds_biased" \
  "; with linear biases everywhere" '{"add_bias_linear": true}'
python3 tests/gpu/scenario_variant.py scenarios/gpt-small-1xH200.json "$gpt_unbiased" "; without linear biases" \
  '{"add_bias_linear": false}'
scenarios=(scenarios/exec-gptoss-moe-small-1xH200.json "$ds_biased" scenarios/exec-deepseek-v3-nomla-small-1xH200.json
           scenarios/gpt-small-1xH200.json "$gpt_unbiased")
status=0
TESTS="${TESTS:-*GroupedMatmul*:*KernelBias*:*MatmulEpilogues*:*Matmul.*:*KernelMoe*}" ITERS="${ITERS:-33}" OUT="$OUT" \
  bash tests/gpu/moe_shapes_device.sh "$bin" "${scenarios[@]}" || status=1
for scenario in "${scenarios[@]:0:2}"; do
  name=$(basename "$scenario" .json)
  echo "### $name: experts and router (rank 0, ms per step)"
  python3 tests/gpu/ops_by_role.py "$OUT/$name/ops.csv" expert_fc1 expert_fc2 router || status=1
  echo
done > "$OUT/experts.md" 2>&1
python3 - "$OUT" > "$OUT/bias_cost.md" <<'PY' || status=1
import csv, os, sys
out = sys.argv[1]
def gemm_ms(name):  # rank 0's GEMMs by role: measured ms per step (medians over the measured iterations)
    totals = {}
    for row in csv.DictReader(open(os.path.join(out, name, "ops.csv"))):
        if row["rank"] == "0" and row["kind"] == "gemm" and row["measured_median_ns"]:
            totals[row["role"]] = totals.get(row["role"], 0.0) + float(row["measured_median_ns"]) / 1e6
    return totals
for biased, plain in (("exec-deepseek-v3-nomla-biased-small-1xH200", "exec-deepseek-v3-nomla-small-1xH200"),
                      ("gpt-small-1xH200", "gpt-small-unbiased-1xH200")):
    b, p = gemm_ms(biased), gemm_ms(plain)
    print(f"### {biased} over {plain}: GEMMs by role, ms per step on rank 0\n")
    print("| role | with biases | without | ratio |\n| --- | --- | --- | --- |")
    for role in sorted(b, key=lambda r: -b[r]):
        if role in p:
            print(f"| {role} | {b[role]:.3f} | {p[role]:.3f} | {b[role] / p[role]:.3f} |")
    print(f"| all | {sum(b.values()):.3f} | {sum(p.values()):.3f} | {sum(b.values()) / sum(p.values()):.3f} |\n")
PY
exit $status
