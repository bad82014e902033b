#!/usr/bin/env bash
# FP8 linears beside post norms and hidden dropout (issue 41 item 3, issue 42 item 4; run since 2026-12-06): a
# row-parallel linear's output gradient is then its branch's own (through the post norm's backward or the dropout
# mask), and its FP8 cast must read that tensor, as the bf16 linear does. On one GPU, each model trained in BF16 and in
# FP8 (hybrid, per-tensor current scaling) from the same seed:
#   gpt-dropout   Megatron GPT-7.5B widths, 4 layers, seq 2048, hidden dropout 0.1 (scenarios/gpt-7.5b-4layers-*);
#   gpt           the same without dropout (the FP8-against-BF16 baseline the check compares with);
#   gemma         scenarios/exec-gemma2-small-1xH200.json (Gemma-2-9B widths, 2 layers, post norms).
# tests/gpu/fp8_branch_gradient_summary.py then holds each FP8 run to its BF16 twin: the first step's gradient norm
# (a cast of the gradient before the mask or the norm would miss the mask's zeros and 1/(1-p), or the norm's
# Jacobian) and the mean loss of the last ten steps. With TWIN_FP8_BRANCH_RECOMPUTE=1 each FP8 model runs again under
# full recompute (NAME-fp8-full), whose losses must be bit for bit the run's without (the recomputed forward draws the
# same masks and casts the same tensors). Exits non-zero when a run fails or a bound is broken.
#   [TWIN_FP8_BRANCH_MODELS="gpt-dropout gpt"] bash tests/gpu/fp8_branch_gradient_device.sh BIN OUT [ITERS]
#   (BIN: a folder of tests/gpu/make_carry.sh; the models default to all three)
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(realpath "$1"); out=$(realpath -m "$2"); iters=${3:-60}
mkdir -p "$out"
export LD_LIBRARY_PATH="$bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
status=0
python3 - "$repo" "$out" <<'PY' || exit 1
import json, sys
repo, out = sys.argv[1], sys.argv[2]
def variant(source, name, fp8, dropout=None):
    scenario = json.load(open(f"{repo}/scenarios/{source}"))
    scenario["training"].pop("fp8", None)
    if fp8:
        scenario["training"]["fp8"] = {"format": "hybrid", "recipe": "tensorwise"}
    if dropout is not None:
        scenario["model"]["hidden_dropout"] = dropout
    scenario["name"] = f"{name} (tests/gpu/fp8_branch_gradient_device.sh)"
    json.dump(scenario, open(f"{out}/scenario-{name}.json", "w"), indent=1)
def full_recompute(name):
    scenario = json.load(open(f"{out}/scenario-{name}.json"))
    if "strategy" in scenario:
        scenario["strategy"]["recompute"] = "full"
    else:
        scenario["search"]["recompute"] = ["full"]
    scenario["name"] += ", full recompute"
    json.dump(scenario, open(f"{out}/scenario-{name}-full.json", "w"), indent=1)
for precision, fp8 in (("bf16", False), ("fp8", True)):
    variant("gpt-7.5b-4layers-bf16-1xH200.json", f"gpt-dropout-{precision}", fp8, 0.1)
    variant("gpt-7.5b-4layers-bf16-1xH200.json", f"gpt-{precision}", fp8, 0.0)
    variant("exec-gemma2-small-1xH200.json", f"gemma-{precision}", fp8)
for name in ("gpt-dropout", "gpt", "gemma"):
    full_recompute(f"{name}-fp8")
PY
models=${TWIN_FP8_BRANCH_MODELS:-gpt-dropout gpt gemma}
for name in $models; do
  precisions="bf16 fp8"; [ -n "${TWIN_FP8_BRANCH_RECOMPUTE:-}" ] && precisions="$precisions fp8-full"
  for precision in $precisions; do
    run=$out/$name-$precision
    "$bin/twin" simulate "$out/scenario-$name-$precision.json" --out "$run" --top 0 --quiet > "$run.log" 2>&1 &&
      "$bin/twin" execute --plan "$run/best.json" --run "$run" --iters "$iters" --warmup 3 --no-trace \
        --attention cudnn-deterministic >> "$run.log" 2>&1
    rc=$?; echo "$name-$precision: exit $rc"; [ "$rc" -eq 0 ] || { status=1; tail -5 "$run.log"; }
  done
done
python3 "$repo/tests/gpu/fp8_branch_gradient_summary.py" "$out" $models | tee "$out/summary.md"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
exit $status
