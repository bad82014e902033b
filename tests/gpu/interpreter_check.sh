#!/usr/bin/env bash
# Issue 42 items 1 and 2 (the interpreter's handlers, one kernel entry per op kind) on a lent machine of four GPUs,
# in one device call that fits a share of 500 s:
#   1. tests/gpu/before_after_check.sh with BEFORE and AFTER while TWIN_CHECK_BUDGET_S (default 120) lasts: the one-GPU
#      correctness cases of execute_check.py (loss curves, step times), then speed while the budget lasts;
#   2. AFTER only, on four GPUs: moe_check.py (MoE blocks under DP, EP, ZeRO-1, TP with SP, PP and CP: the MoE
#      handler, the ring handler and the MoE kernel entries) and context_check.py (ring attention: the ring handler),
#      each under a wall limit (TWIN_MOE_LIMIT_S, TWIN_CONTEXT_LIMIT_S; default 200 and 120).
#   bash tests/gpu/interpreter_check.sh REPO BEFORE AFTER OUT
# REPO: a checkout with tests/gpu/ and scenarios/; BEFORE, AFTER: folders made by tests/gpu/make_carry.sh (twin,
# twin-gpu, test_gpu, lib/). OUT gets before-after/ (compare.md), moe.log, context.log and their tables.
set -uo pipefail
repo=$(realpath "$1"); before=$(realpath "$2"); after=$(realpath "$3"); out=$(realpath -m "$4")
mkdir -p "$out"
export NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}" PYTHONUNBUFFERED=1
TWIN_CHECK_BUDGET_S=${TWIN_CHECK_BUDGET_S:-120} bash "$repo/tests/gpu/before_after_check.sh" "$before" "$after" \
  "$out/before-after"
export LD_LIBRARY_PATH=$after/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
gpus=$(nvidia-smi -L | wc -l)
cd "$repo/tests/gpu" || exit 1
for check in moe context; do
  limit=${TWIN_MOE_LIMIT_S:-200}; [ $check = context ] && limit=${TWIN_CONTEXT_LIMIT_S:-120}
  SECONDS=0
  timeout "$limit" python3 "${check}_check.py" --twin "$after/twin" --gpus "$gpus" --iters 8 \
    --out "/tmp/interpreter-$check" > "$out/$check.log" 2>&1
  echo "${check}_check: exit $?, ${SECONDS} s (limit ${limit} s)"
  cp "/tmp/interpreter-$check/${check}_check.md" "/tmp/interpreter-$check/${check}_check.json" "$out/" 2>/dev/null
  grep -E "^\| " "$out/$check.log" | tail -30
done
date -u
