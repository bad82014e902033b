#!/usr/bin/env bash
# What recording every kernel with CUPTI costs a twin execute step: each PLAN run twice with the kernel records the
# studies use and twice with --no-trace, alternating, and the measured step (metrics.json's median iteration_s) of
# each printed. A study's measured step is taken with the records on (ops.csv needs them).
# Usage (device): bash tests/gpu/trace_overhead.sh BIN_DIR PLAN.json...    $OUT: trace_overhead.csv
set -uo pipefail
bin="$1"; shift
OUT="${OUT:-out/trace-overhead}"
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
echo "plan,records,repeat,iteration_s" > "$OUT/trace_overhead.csv"
for plan in "$@"; do
  for repeat in 1 2; do
    for records in on off; do
      run="/tmp/trace-overhead-$(basename "$plan" .json)-$records-$repeat"
      flag=""; [ "$records" = off ] && flag="--no-trace"
      "$bin/twin" execute --plan "$plan" --run "$run" --iters 12 --warmup 3 $flag > "$run.log" 2>&1 ||
        { echo "$plan $records: exit $?"; tail -3 "$run.log"; continue; }
      step=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['measured']['iteration_s'])" "$run/metrics.json")
      echo "$(basename "$plan" .json),$records,$repeat,$step" | tee -a "$OUT/trace_overhead.csv"
    done
  done
done
