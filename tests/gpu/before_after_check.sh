#!/usr/bin/env bash
# Two builds of twin through the same one-GPU checks, each check before then after, so that a change that must not
# change execution shows its loss bits and step times side by side in one device call (issue 42):
#   bash tests/gpu/before_after_check.sh BEFORE AFTER [OUT]
# BEFORE, AFTER: folders made by tests/gpu/make_carry.sh (twin, twin-gpu, test_gpu, lib/). The checks, in this order
# while TWIN_CHECK_BUDGET_S (default 430) lasts: execute_check.py's one-GPU correctness cases (loss curves), two of
# its speed cases (Llama-2-7B widths, 4 layers, micro-batch 1 and 2), the hot-switching family check on one GPU,
# test_gpu. OUT (default out/before-after) gets each check's log and compare.md (tests/gpu/compare_runs.py).
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
before=$(realpath "$1"); after=$(realpath "$2"); out=$(realpath -m "${3:-out/before-after}")
mkdir -p "$out"
export NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}" PYTHONUNBUFFERED=1
budget=${TWIN_CHECK_BUDGET_S:-430}
library_path=${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
date -u
SECONDS=0
run() {  # run NAME SIDE COMMAND...: its log under $out, its exit and wall time printed; skipped once the budget is spent
  local name=$1 side=$2 start=$SECONDS; shift 2
  if [ "$SECONDS" -ge "$budget" ]; then echo "$name $side: skipped (budget of ${budget} s spent)"; return; fi
  "$@" > "$out/$name-$side.log" 2>&1
  echo "$name $side: exit $?, $((SECONDS - start)) s"
}
work=/tmp/before-after
for check in correctness speed hot-switch test_gpu; do
  for side in before after; do
    bin=$before; [ $side = after ] && bin=$after
    export LD_LIBRARY_PATH=$bin/lib${library_path:+:$library_path}
    case $check in
      correctness) run $check $side python3 "$repo/tests/gpu/execute_check.py" --twin "$bin/twin" --gpus 1 \
                     --only correctness --out "$work/$side/correctness" ;;
      speed) run $check $side python3 "$repo/tests/gpu/execute_check.py" --twin "$bin/twin" --gpus 1 --only speed \
               --speed-cases 7b4l-mbs1,7b4l-mbs2 --out "$work/$side/speed" ;;
      hot-switch) (cd "$repo" && run $check $side python3 tests/gpu/family_check.py --twin "$bin/twin" --family hot-switch \
                     --lr 1e-4 --scenario scenarios/llama2-7b-1xH200-hot-switch.json --out "$work/$side/hot-switch") ;;
      test_gpu) run $check $side "$bin/test_gpu" --gtest_brief=1 ;;
    esac
  done
done
grep -hE "tests? (ran|PASSED|FAILED)|^\[  (PASSED|FAILED)" "$out"/test_gpu-*.log 2>/dev/null
python3 "$repo/tests/gpu/compare_runs.py" "$work/before" "$work/after" | tee "$out/compare.md"
date -u
