#!/usr/bin/env bash
# Where an MoE plan's expert GEMMs spend their time (issue 40 item 3): each PLAN run by `twin execute` with its kernel
# records, then tests/gpu/op_kernel_gaps.py on the experts' forward and backward GEMMs of rank 0 (each op's kernels,
# their sum, its span and the idle time inside it: idle says the host's issue set the pace, a sum near the span that
# the kernels themselves did).
# Usage (device): bash tests/gpu/expert_gaps_device.sh BIN_DIR PLAN.json...   $OUT: <plan>/ (metrics, ops.csv), gaps
set -uo pipefail
cd "$(dirname "$0")/../.."
bin="$1"; shift
OUT="${OUT:-out/expert-gaps}"
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
for plan in "$@"; do
  name="$(basename "$(dirname "$plan")")"; run="/tmp/expert-gaps-$name"
  "$bin/twin" execute --plan "$plan" --run "$run" --iters 9 --warmup 3 > "$OUT/$name.log" 2>&1 ||
    { echo "$name: exit $?"; tail -5 "$OUT/$name.log"; continue; }
  for pass in fwd bwd; do
    python3 tests/gpu/op_kernel_gaps.py "$run" "expert_fc[12]\.$pass" 0 > "$OUT/$name-$pass-gaps.txt" 2>&1
    echo "== $name $pass"; tail -4 "$OUT/$name-$pass-gaps.txt"
  done
  mkdir -p "$OUT/$name" && cp "$run/metrics.json" "$run/ops.csv" "$OUT/$name/"
done
