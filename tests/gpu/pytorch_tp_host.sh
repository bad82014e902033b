#!/usr/bin/env bash
# Issue 38: pytorch_tp_host.py over the GPUs of one machine (two H200s: TP 2), its JSON lines to $OUT/tp_host.jsonl,
# its traces tarred into $OUT/tp_host_traces.tar, the log in $OUT/tp_host.log. BUDGET_S: no configuration is
# started after it; LIMIT_S: the run is interrupted after it, what was measured kept.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
OUT="${OUT:-./out}"; BUDGET_S="${BUDGET_S:-60}"; LIMIT_S="${LIMIT_S:-100}"; GPUS="${GPUS:-2}"
mkdir -p "$OUT/traces"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
{
  date -u; nproc; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
  timeout -s INT "$LIMIT_S" python3 -m torch.distributed.run --standalone --nproc-per-node "$GPUS" \
    "$here/pytorch_tp_host.py" --budget-s "$BUDGET_S" --result "$OUT/tp_host.jsonl" --trace-dir "$OUT/traces"
  echo "rc $?"; date -u
} > "$OUT/tp_host.log" 2>&1
tar -C "$OUT" -cf "$OUT/tp_host_traces.tar" traces && rm -rf "$OUT/traces"
