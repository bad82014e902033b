#!/usr/bin/env bash
# Issue 42's loss spike, recipe or race: one plan (Llama-2-13B widths, 8 layers, seq 4096, 16 sequences a step;
# TP 2 with SP x DP 2, ZeRO-1, micro-batch 2, 1F1B on four GPUs), one seed, cuDNN's deterministic attention:
#   old-1, old-2  twin's former recipe (constant learning rate 3e-4 from the first step, clipping at 1.0), twice:
#                 the same bits, or a nondeterminism;
#   warmup4       Megatron-style: --lr-warmup-iters 4, cosine decay to 3e-5 over the run, clipping at 1.0;
#   warmup8       the same with 8 iterations of warm-up;
#   lr1e-4        the former recipe at a third of the learning rate;
#   before        the former recipe with BEFORE's binaries (main before the recipe: the same bits as old-1?);
#   blocking-1/2  when old-1 and old-2 differ: both again under CUDA_LAUNCH_BLOCKING=1 (no two kernels of a rank at
#                 once), which a race between streams does not survive;
#   warmup16-1e-4 a third of the peak rate reached over 16 iterations of warm-up, cosine to 1e-5;
#   lr3e-5        the former recipe at a tenth of the learning rate.
# With TWIN_SPIKE_GPUS=1 the same model, batch, tokens and seed run on one GPU (TP 1, no SP, eight micro-batches of
# 2 accumulated, no ZeRO): a spike there is no parallel plan's doing.
# Usage: [TWIN_SPIKE_RUNS="old-1 old-2 ..."] [TWIN_SPIKE_GPUS=1] \
#          bash tests/gpu/loss_spike_check.sh BIN OUT [STEPS] [BEFORE]
#        (BIN, BEFORE: folders of tests/gpu/make_carry.sh; TWIN_SPIKE_RUNS defaults to all but before, which needs
#        BEFORE). Prints the runs' losses, gradient norms and learning rates per step (tests/gpu/loss_spike_table.py).
set -uo pipefail
bin=$(realpath "$1"); out=$(realpath -m "$2"); steps=${3:-16}; before=${4:+$(realpath "$4")}
runs=${TWIN_SPIKE_RUNS:-old-1 old-2 warmup4 warmup8 lr1e-4${before:+ before}}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
export NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}" LD_LIBRARY_PATH="$bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
cat > "$out/scenario.json" <<'JSON'
{
  "name": "issue 42 loss spike: llama2-13b widths, 8 layers, TP 2 + SP, DP 2, ZeRO-1, 1F1B",
  "model": { "preset": "llama2-13b", "num_layers": 8 },
  "training": { "seq_length": 4096, "global_batch_size": 16 },
  "cluster": { "nodes": [ { "count": 1, "gpu": "H200-141GB", "gpus_per_node": 4,
                            "intra_node": { "kind": "nvswitch", "bandwidth_GBps": 450 } } ] },
  "strategy": { "tensor_model_parallel_size": 2, "pipeline_model_parallel_size": 1, "sequence_parallel": true,
                "micro_batch_size": 2, "zero_stage": 1, "recompute": "none", "schedule": "1f1b" },
  "profile": "h200-x4"
}
JSON
if [ "${TWIN_SPIKE_GPUS:-4}" = 1 ]; then  # the same model, batch and micro-batch on one GPU
  python3 - "$out/scenario.json" <<'PY' || exit 1
import json, sys
scenario = json.load(open(sys.argv[1]))
scenario["name"] = "issue 42 loss spike on one GPU: llama2-13b widths, 8 layers, eight micro-batches of 2"
scenario["cluster"]["nodes"][0]["gpus_per_node"] = 1
scenario["strategy"].update(tensor_model_parallel_size=1, sequence_parallel=False, zero_stage=0)
scenario["profile"] = "h200-x1"
json.dump(scenario, open(sys.argv[1], "w"), indent=2)
PY
fi
"$bin/twin" simulate "$out/scenario.json" --out "$out/plan" > "$out/simulate.log" 2>&1 || { cat "$out/simulate.log"; exit 1; }
execute() {  # execute NAME ARGS...   (TWIN_BIN: another build's folder)
  local name=$1 start=$SECONDS dir=${TWIN_BIN:-$bin}; shift
  LD_LIBRARY_PATH=$dir/lib:$LD_LIBRARY_PATH "$dir/twin" execute --plan "$out/plan/best.json" --run "$out/$name" \
    --iters "$steps" --warmup 2 --no-trace --attention cudnn-deterministic "$@" > "$out/$name.log" 2>&1
  echo "$name: exit $?, $((SECONDS - start)) s"
}
for run in $runs; do
  case $run in
    old-1|old-2) execute $run ;;
    warmup4) execute $run --lr-warmup-iters 4 --lr-decay-style cosine --min-lr 3e-5 ;;
    warmup8) execute $run --lr-warmup-iters 8 --lr-decay-style cosine --min-lr 3e-5 ;;
    lr1e-4) execute $run --lr 1e-4 ;;
    warmup16-1e-4) execute $run --lr 1e-4 --lr-warmup-iters 16 --lr-decay-style cosine --min-lr 1e-5 ;;
    lr3e-5) execute $run --lr 3e-5 ;;
    before) TWIN_BIN=$before execute $run ;;
  esac
done
if [ -d "$out/old-2" ] && ! python3 "$here/loss_spike_table.py" --same "$out/old-1" "$out/old-2"; then
  CUDA_LAUNCH_BLOCKING=1 execute blocking-1
  CUDA_LAUNCH_BLOCKING=1 execute blocking-2
fi
python3 "$here/loss_spike_table.py" \
  "$out"/{old-1,old-2,before,warmup4,warmup8,lr1e-4,warmup16-1e-4,lr3e-5,blocking-1,blocking-2} | tee "$out/table.md"
