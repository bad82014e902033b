#!/usr/bin/env bash
# Issue 38's runs of pytorch_fsdp_train.py (Llama-2-7B widths, seq 4096), each in its own torchrun.
#   STUDY=1xH200 (default): FSDP2 over one GPU, a few sizes, micro-batches and checkpointing.
#   STUDY=4xH200: one machine of four GPUs; one configuration profiled on all ranks (the one folded), the others
#     (FSDP vs TP x FSDP, micro-batch, checkpointing, compile, 1, 2 and 4 GPUs) timed without the profiler, then
#     profiled on rank 0 only for diagnosis. Runs of one or two GPUs go two at a time on disjoint GPUs.
#   STUDY=host: pytorch_host_cost.py over $GPUS GPUs, the host's time per step of the 4xH200 configurations.
# RESULT lines go to $OUT/results.jsonl, gzipped traces to $OUT/traces/ (4xH200: tarred into $OUT/fit_traces.tar
# and $OUT/other_traces.tar). Stops starting runs after $BUDGET_S seconds.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
OUT="${OUT:-./out}"; BUDGET_S="${BUDGET_S:-170}"; GPUS="${GPUS:-1}"; STUDY="${STUDY:-1xH200}"
mkdir -p "$OUT/traces"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
start=$(date +%s); status=0
python3 -c 'import torch; print("torch", torch.__version__, "gpus", torch.cuda.device_count(), torch.cuda.get_device_name())'
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
over_budget() { [ $(( $(date +%s) - start )) -gt "$BUDGET_S" ]; }
run_on() {  # $1: the GPUs (CUDA_VISIBLE_DEVICES); $2: profile, rank0 (profile, keep rank 0's trace) or plain
  local devices=$1 mode=$2; shift 2
  if over_budget; then echo "SKIPPED (time budget): $*"; return; fi
  local n; n=$(awk -F, '{print NF}' <<<"$devices")
  local extra=(); [ "$mode" != plain ] && extra=(--profile-dir "$OUT/traces/$mode" --profile-gzip)
  echo "=== GPUs $devices: $* ($(date -u +%H:%M:%S))"
  CUDA_VISIBLE_DEVICES=$devices python3 -m torch.distributed.run --standalone --nproc-per-node "$n" \
    "$here/pytorch_fsdp_train.py" --result "$OUT/results.jsonl" "${extra[@]}" "$@" || { echo "FAILED: $*"; status=1; }
  [ "$mode" = rank0 ] && rm -f "$OUT"/traces/rank0/*_rank[1-9]*
}
run() { local mode=$1; shift; run_on "$(seq -s, 0 $((GPUS - 1)))" "$mode" "$@"; }

study_1xH200() {
  run profile --layers 4 --micro-batch 1
  run profile --layers 4 --micro-batch 2
  run profile --layers 4 --micro-batch 1 --checkpoint full
  run profile --layers 8 --micro-batch 1 --profile-steps 2
  run plain   --layers 8 --micro-batch 2 --checkpoint full
  run plain   --layers 4 --micro-batch 1 --sdpa flash
  run profile --layers 4 --micro-batch 1 --compile --profile-steps 2
}

study_4xH200() {
  local L=(--layers 8 --profile-steps 2)
  run_on 0,1,2,3 profile --layers 8                         # the fit: FSDP over 4, 3 profiled steps
  run_on 0,1,2,3 rank0 "${L[@]}" --tp 2
  # runs on fewer GPUs carry the world size in their names (the default names leave it out)
  run_on 0,1 rank0 "${L[@]}" --name w2_mb1_tp1_ckpt-none & run_on 2,3 rank0 "${L[@]}" --tp 2 --name w2_mb1_tp2_ckpt-none & wait
  run_on 0 rank0 "${L[@]}" --name w1_mb1_tp1_ckpt-none &
  run_on 1 rank0 "${L[@]}" --micro-batch 2 --checkpoint full --name w1_mb2_tp1_ckpt-full & wait
  run_on 0,1,2,3 rank0 "${L[@]}" --micro-batch 2
  run_on 0,1,2,3 rank0 "${L[@]}" --checkpoint full
  run_on 0,1,2,3 rank0 "${L[@]}" --compile
  run_on 0,1,2,3 rank0 "${L[@]}" --tp 2 --micro-batch 2
  run_on 0,1,2,3 rank0 "${L[@]}" --tp 4
  run_on 0,1,2,3 rank0 "${L[@]}" --tp 2 --compile --checkpoint full
  tar -C "$OUT/traces" -cf "$OUT/fit_traces.tar" profile && tar -C "$OUT/traces" -cf "$OUT/other_traces.tar" rank0 \
    && rm -rf "$OUT/traces"
}

# the host's time per step and per layer of the same model at tiny widths, every configuration of 4xH200 in one torchrun
study_host() {
  python3 -m torch.distributed.run --standalone --nproc-per-node "$GPUS" "$here/pytorch_host_cost.py" \
    --result "$OUT/host_cost.jsonl" || { echo "FAILED: pytorch_host_cost.py"; status=1; }
}

case "$STUDY" in
  1xH200) study_1xH200 ;;
  4xH200) study_4xH200 ;;
  host) study_host ;;
  *) echo "pytorch_fsdp_study.sh: STUDY must be 1xH200, 4xH200 or host, got $STUDY"; exit 2 ;;
esac
echo "study done in $(( $(date +%s) - start )) s"
exit $status
