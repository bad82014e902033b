#!/usr/bin/env bash
# The PyTorch baseline twin's executor is compared with: eager and torch.compile at micro-batch 1 and 2,
# each in its own python process on one GPU. RESULT lines are appended to $OUT/pytorch_baseline.jsonl,
# full logs go to $OUT/pytorch_baseline_<mode>_mb<B>.log. Extra arguments go to every run
# (e.g. --master-fp32, --layers 8, --kv-heads 8). Exits non-zero if any run failed.
set -uo pipefail
script="$(dirname "$0")/pytorch_baseline.py"
OUT="${OUT:-./out}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
status=0
for mode in eager compile; do
  for micro_batch in 1 2; do
    log="$OUT/pytorch_baseline_${mode}_mb${micro_batch}.log"
    echo "=== pytorch_baseline --mode $mode --micro-batch $micro_batch $* ($(date -u +%H:%M:%S))"
    python3 "$script" --mode "$mode" --micro-batch "$micro_batch" "$@" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    result=$(grep '^RESULT ' "$log" | tail -1 | sed 's/^RESULT //')
    if [ "$rc" -ne 0 ] || [ -z "$result" ]; then
      echo "FAILED: --mode $mode --micro-batch $micro_batch (exit $rc)" >&2
      status=1
    else
      echo "$result" >> "$OUT/pytorch_baseline.jsonl"
    fi
  done
done
exit $status
