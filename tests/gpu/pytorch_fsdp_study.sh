#!/usr/bin/env bash
# Issue 38's single-GPU runs of pytorch_fsdp_train.py: Llama-2-7B widths, seq 4096, FSDP2 over the GPUs given
# (one here), a few sizes, micro-batches and checkpointing, each in its own torchrun. RESULT lines go to
# $OUT/results.jsonl, gzipped profiler traces to $OUT/traces/. Stops starting runs after $BUDGET_S seconds.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
OUT="${OUT:-./out}"; BUDGET_S="${BUDGET_S:-170}"; GPUS="${GPUS:-1}"
mkdir -p "$OUT/traces"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
start=$(date +%s); status=0
python3 -c 'import torch; print("torch", torch.__version__, "gpus", torch.cuda.device_count(), torch.cuda.get_device_name())'
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
run() {  # $1: profile or plain; the rest: pytorch_fsdp_train.py arguments
  local mode=$1; shift
  if [ $(( $(date +%s) - start )) -gt "$BUDGET_S" ]; then echo "SKIPPED (time budget): $*"; return; fi
  local extra=(); [ "$mode" = profile ] && extra=(--profile-dir "$OUT/traces" --profile-gzip)
  echo "=== $* ($(date -u +%H:%M:%S))"
  python3 -m torch.distributed.run --standalone --nproc-per-node "$GPUS" "$here/pytorch_fsdp_train.py" --result "$OUT/results.jsonl" \
    "${extra[@]}" "$@" || { echo "FAILED: $*"; status=1; }
}
run profile --layers 4 --micro-batch 1
run profile --layers 4 --micro-batch 2
run profile --layers 4 --micro-batch 1 --checkpoint full
run profile --layers 8 --micro-batch 1 --profile-steps 2
run plain   --layers 8 --micro-batch 2 --checkpoint full
run plain   --layers 4 --micro-batch 1 --sdpa flash
run profile --layers 4 --micro-batch 1 --compile --profile-steps 2
echo "study done in $(( $(date +%s) - start )) s"
exit $status
