#!/usr/bin/env bash
# PyTorch's early-stopping checkpoint in twin execute (framework.checkpoint_early_stop; executor/recompute_check.hpp),
# on one GPU, from the repository root with the binaries in $1 (tests/gpu/make_carry.sh): four models under full
# recompute, each run with the whole forward repeated (checkpoint_early_stop false, Megatron's) and stopped early
# (true: the repeated forward ends where the backward's last saved tensor is made, core/layer.hpp
# blocks_recomputed_by_early_stop): Llama-2-7B widths (RMSNorm, SwiGLU), Megatron GPT-7.5B widths (LayerNorm, biases,
# GeLU), a small Mixtral-shaped MoE with an expert capacity, and a small DeepSeek-V3-shaped stack (MLA, a dense first
# layer, shared and routed experts; its first run, 2026-12-05, found every shared-expert forward failing since
# 2026-12-04, executor/gpu/dense_block_recompute.cpp). Each plan is simulated with its shipped profile and run ITERS steps with --attention
# cudnn-deterministic. Asserted: the early-stopping run's losses bit for bit its model's whole run's (the values the
# backward reads are the same); its peak within 0.5% of the whole run's (the early stop frees nothing the peak holds);
# every run's peak within its model's tolerance of the prediction: 3% (issue 37's aim) for the dense models, 5% for
# the MoE, whose fully recomputed peak the memory model over-counts by 4% with or without the early stop (first
# measured here, 2026-12-05; not explained yet). Reported, not asserted (a timed test asserts no speed): each step
# against its prediction, and the share of the step the early stop saves. Under $OUT: run.log and steps.tgz.
# Usage (device): OUT=DIR bash tests/gpu/checkpoint_early_stop_device.sh BIN
set -uo pipefail
bin="$(cd "$1" && pwd)"
OUT="${OUT:-out/checkpoint-early-stop}"
work=/tmp/checkpoint-early-stop
mkdir -p "$OUT"; rm -rf "$work"; mkdir -p "$work"
export LD_LIBRARY_PATH="$bin/lib:${LD_LIBRARY_PATH:-}" NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
date -u +"start %FT%TZ" > "$OUT/run.log"
models="llama:scenarios/llama2-7b-4layers-bf16-1xH200.json:2 gpt:scenarios/gpt-7.5b-4layers-bf16-1xH200.json:2
moe:scenarios/exec-mixtral-capacity-small-1xH200.json:2 mla:scenarios/exec-deepseek-v3-mla-small-1xH200.json:4"
runs=""
for model in $models; do
  IFS=: read -r name base mbs <<< "$model"
  python3 - "$base" "$work" "$name" "$mbs" <<'PY'
import json, sys
base, work, model, mbs = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3], int(sys.argv[4])
for variant, early in (("whole", False), ("early", True)):
    s = json.loads(json.dumps(base))
    if "strategy" in s:
        s["strategy"].update(micro_batch_size=mbs, recompute="full")
    else:
        s["search"].update(micro_batch_size=[mbs], recompute=["full"])
    s.setdefault("framework", {})["checkpoint_early_stop"] = early
    json.dump(s, open(f"{work}/{model}-{variant}.json", "w"), indent=1)
PY
  runs="$runs $name-whole $name-early"
done
status=0
for name in $runs; do
  { "$bin/twin-gpu" simulate "$work/$name.json" --out "$work/$name" --quiet --top 0 &&
    "$bin/twin-gpu" execute --best --run "$work/$name" --iters "${ITERS:-12}" --warmup 3 --no-trace \
      --attention cudnn-deterministic; } > "$work/$name.log" 2>&1 || status=1
  tail -3 "$work/$name.log" >> "$OUT/run.log"
done
python3 - "$work" $runs >> "$OUT/run.log" <<'PY' || status=1
import csv, json, os, sys
work, names = sys.argv[1], sys.argv[2:]
peak_tolerance = {"llama": 0.03, "gpt": 0.03, "moe": 0.05, "mla": 0.03}
ok = len(names) > 0
def read(n):
    steps = list(csv.DictReader(open(f"{work}/{n}/steps.csv")))
    metrics = json.load(open(f"{work}/{n}/metrics.json"))
    rank = metrics["ranks"][0]
    rank["step_s"], rank["predicted_step_s"] = metrics["measured"]["iteration_s"], metrics["predicted"]["iteration_time_s"]
    return steps, rank
for n in names:
    try:
        steps, rank = read(n)
    except (OSError, KeyError, IndexError) as error:
        print(f"{n}: no run ({error})")
        ok = False
        continue
    measured, predicted = rank["peak_memory_GiB"], rank["predicted_allocated_peak_GiB"]
    step, step_predicted = rank["step_s"], rank["predicted_step_s"]
    print(f"{n}: loss {steps[0]['loss']} -> {steps[-1]['loss']}; peak {measured:.3f} GiB measured, "
          f"{predicted:.3f} predicted ({measured / predicted - 1:+.2%}); step {step:.4f} s measured, "
          f"{step_predicted:.4f} predicted ({step_predicted / step - 1:+.2%})")
    ok &= abs(measured / predicted - 1) <= peak_tolerance[n.split("-")[0]]
    if not n.endswith("-early"):
        continue
    try:
        whole_steps, whole = read(n.replace("-early", "-whole"))
    except (OSError, KeyError, IndexError):
        ok = False
        continue
    same = sum(a["loss"] == b["loss"] for a, b in zip(whole_steps, steps))
    saved = 1 - step / whole["step_s"]
    saved_predicted = 1 - step_predicted / whole["predicted_step_s"]
    print(f"  {same} of {len(steps)} losses bit-identical to the whole recompute; the early stop saves "
          f"{saved:+.2%} of the step measured, {saved_predicted:+.2%} predicted")
    ok &= same == len(steps) == len(whole_steps) > 0
    ok &= abs(measured / whole["peak_memory_GiB"] - 1) <= 0.005
print("checkpoint_early_stop_device:", "passed" if ok else "failed")
sys.exit(0 if ok else 1)
PY
tar czf "$OUT/steps.tgz" -C "$work" $(for n in $runs; do echo "$n/steps.csv $n/metrics.json $n.log"; done) 2>/dev/null ||
  status=1
date -u +"end %FT%TZ status $status" >> "$OUT/run.log"
exit $status
