#!/usr/bin/env bash
# Step times of plans already simulated, rerun with more steps before and after alternately (before, after, before,
# after, ...), so that one sample of ~10 ms steps per side does not decide a comparison (issue 42):
#   bash tests/gpu/rerun_speed.sh BEFORE AFTER ITERS ROUNDS PLAN_FOLDER...
# BEFORE, AFTER: folders made by tests/gpu/make_carry.sh; each PLAN_FOLDER holds a best.json (a run of
# before_after_check.sh leaves them under /tmp/before-after/SIDE/correctness/CASE). Prints per run its side, plan,
# round and the median and mean step time after 5 warm-up steps.
set -uo pipefail
before=$(realpath "$1"); after=$(realpath "$2"); iters=$3; rounds=$4; shift 4
library_path=${LD_LIBRARY_PATH:-}
echo "| plan | round | side | steps | median step s | mean step s |"
echo "|---|---|---|---|---|---|"
for round in $(seq "$rounds"); do
  for folder in "$@"; do
    for side in before after; do
      bin=$before; [ $side = after ] && bin=$after
      run=/tmp/rerun-speed/$side/$(basename "$folder")-$round
      mkdir -p "$run"
      LD_LIBRARY_PATH=$bin/lib${library_path:+:$library_path} "$bin/twin" execute --plan "$folder/best.json" \
        --run "$run" --iters "$iters" --warmup 5 > "$run.log" 2>&1 || { echo "| $(basename "$folder") | $round | $side | FAILED | | |"; continue; }
      python3 -c '
import json, statistics, sys
m = json.load(open(sys.argv[1]))
times = [s["iteration_s"] for s in m["steps"][5:]]
print(f"| {sys.argv[2]} | {sys.argv[3]} | {sys.argv[4]} | {len(times)} | {statistics.median(times):.4f} | {statistics.mean(times):.4f} |")
' "$run/metrics.json" "$(basename "$folder")" "$round" "$side"
    done
  done
done
