#!/usr/bin/env bash
# DeepSeek-V3's router in twin execute (issue 40 item 1), from the repository root with the binaries in $1 (twin-gpu,
# test_gpu and lib/ as tests/gpu/make_carry.sh packs them): the router kernels against their float64 references
# (every scoring variant, the bias step), then the DeepSeek-V3-shaped model of
# scenarios/exec-deepseek-v3-router-small-1xH200.json trained ITERS steps (default 40, 3 warm-up) five ways, the one
# plan its search picks: softmax with the balancing loss (the scenario's router keys removed); V3's sigmoid scores
# x2.5 among 4 of 8 groups without the expert bias, with it at Megatron's rate (1e-3) and at 1e-2 (these keep the
# balancing loss's weight, 1e-2), and with it at 1e-2 alone (aux_loss_coeff 0). The check fails unless every loss
# falls and the fast bias's last 15 steps hold less skew than the unbiased sigmoid router's, step by step on the mean.
# summary.md: per run the loss first and last, the step time beside the prediction, and the routing's skew (the
# busiest expert's copies over the mean, per MoE layer and step, averaged over layers) in the first 5 steps and the
# last 15, and the biased runs' skew over the unbiased sigmoid run's, step by step (each step's batch sets most of
# its skew). Logs, metrics.json, steps.csv and measured/rank0.json per run under $OUT.
# Usage (device): OUT=DIR bash tests/gpu/router_scoring_device.sh BIN
set -uo pipefail
bin="$(cd "$1" && pwd)"
OUT="${OUT:-out/router-scoring}"
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$bin/lib:${LD_LIBRARY_PATH:-}" NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
status=0
date -u +"start %FT%TZ" > "$OUT/run.log"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> "$OUT/run.log"
"$bin/test_gpu" --gtest_filter="${TESTS:-*RouterScoring*:*KernelMoeScoring*:*KernelMoe*}" > "$OUT/test_gpu.log" 2>&1 ||
  status=1
grep -E "^\[  (PASSED|FAILED) |tests? ran" "$OUT/test_gpu.log" >> "$OUT/run.log"
scenario=scenarios/exec-deepseek-v3-router-small-1xH200.json
python3 - "$scenario" /tmp/router-scenarios <<'PY'
import json, os, sys
base = json.load(open(sys.argv[1]))
os.makedirs(sys.argv[2], exist_ok=True)
router = ("router_score_function", "router_topk_scaling_factor", "router_expert_bias", "router_bias_update_rate",
          "router_num_groups", "router_group_topk")
unbiased = ("router_score_function", "router_topk_scaling_factor", "router_num_groups", "router_group_topk")
for name, keep, rate in (("softmax", (), None), ("sigmoid", unbiased, None),
                         ("sigmoid-bias", router, None), ("sigmoid-bias-fast", router, 1e-2),
                         ("sigmoid-bias-fast-alone", router, 1e-2)):
    s = json.loads(json.dumps(base))
    s["model"]["moe"] = {k: v for k, v in s["model"]["moe"].items() if k not in router or k in keep}
    if rate:
        s["model"]["moe"]["router_bias_update_rate"] = rate
    if name.endswith("alone"):  # the bias alone, as aux-loss-free balancing means it: no load-balancing loss
        s["model"]["moe"]["aux_loss_coeff"] = 0
    json.dump(s, open(os.path.join(sys.argv[2], name + ".json"), "w"), indent=1)
PY
for variant in softmax sigmoid sigmoid-bias sigmoid-bias-fast sigmoid-bias-fast-alone; do
  run="/tmp/router-runs/$variant"
  rm -rf "$run"; mkdir -p "$run" "$OUT/$variant"
  { "$bin/twin-gpu" simulate "/tmp/router-scenarios/$variant.json" --out "$run" --quiet --top 0 &&
    "$bin/twin-gpu" execute --best --run "$run" --iters "${ITERS:-40}" --warmup 3; } > "$OUT/$variant/run.log" 2>&1 ||
    status=1
  cp "$run"/metrics.json "$run"/steps.csv "$OUT/$variant/" 2>/dev/null
  cp "$run"/measured/rank0.json "$OUT/$variant/rank0.json" 2>/dev/null
  date -u +"$variant done %FT%TZ" >> "$OUT/run.log"
done
python3 - "$OUT" > "$OUT/summary.md" <<'PY' || status=1
import collections, json, os, sys
out = sys.argv[1]
variants = ("softmax", "sigmoid", "sigmoid-bias", "sigmoid-bias-fast", "sigmoid-bias-fast-alone")


def skew_per_step(variant):
    """The busiest expert's copies over the mean, per step, averaged over the MoE layers (a step's counts summed
    over its micro-batches)."""
    loads = json.load(open(os.path.join(out, variant, "rank0.json")))["expert_loads"]
    per_step = collections.defaultdict(lambda: collections.defaultdict(list))
    for step, layer, tokens in zip(loads["iteration"], loads["layer"], loads["tokens_per_expert"]):
        counts = per_step[step][layer]
        per_step[step][layer] = [a + b for a, b in zip(counts, tokens)] if counts else tokens
    return [sum(max(c) / (sum(c) / len(c)) for c in per_step[s].values()) / len(per_step[s]) for s in sorted(per_step)]


print("| router | steps | loss first | loss last | iteration s | predicted s | skew, steps 1-5 | skew, last 15 | "
      "last 15 against sigmoid's, step by step |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
failed, skews = False, {}
for variant in variants:
    try:
        m = json.load(open(os.path.join(out, variant, "metrics.json")))
        skews[variant] = skew = skew_per_step(variant)
    except (OSError, KeyError, ValueError) as error:
        print(f"| {variant} | FAILED: {error} | | | | | | | |")
        failed = True
        continue
    # Each step's batch sets most of its skew (the same steps peak in every run): compared step by step.
    paired = ""
    if "sigmoid" in skews and variant.startswith("sigmoid-bias"):
        ratios = [x / y for x, y in zip(skew[-15:], skews["sigmoid"][-15:])]
        paired = f"{sum(ratios) / len(ratios):.3f} ({sum(r < 1 for r in ratios)} of 15 lower)"
        failed |= variant == "sigmoid-bias-fast" and not sum(ratios) / len(ratios) < 1
    losses = [step["loss"] for step in m["steps"]]
    measured, predicted = m["measured"]["iteration_s"], m["predicted"]["iteration_time_s"]
    print(f"| {variant} | {len(losses)} | {losses[0]:.3f} | {losses[-1]:.3f} | {measured:.4f} | {predicted:.4f} | "
          f"{sum(skew[:5]) / 5:.2f} | {sum(skew[-15:]) / 15:.2f} | {paired} |")
    failed |= not losses[-1] < losses[0]
sys.exit(1 if failed else 0)
PY
cat "$OUT/summary.md" >> "$OUT/run.log"
exit $status
