#!/usr/bin/env bash
# Issue 42 item 1 (the family interface) on one GPU, in one device call: what must not change, before then after.
#   bash tests/gpu/family_interface_check.sh BEFORE AFTER OUT
# BEFORE, AFTER: folders of twin and twin-gpu (AFTER also test_gpu and lib/, as tests/gpu/make_carry.sh packs them;
# BEFORE uses AFTER's lib/). Runs execute_check.py's one-GPU correctness cases (loss curves, 12 steps) and its speed
# case at Llama-2-7B widths (4 layers, micro-batch 1, deterministic attention: its losses compare bit for bit),
# each before then after, then AFTER's test_gpu (at most TEST_GPU_LIMIT_S, default 60 s), and compares every run's
# losses bit for bit and median step time (tests/gpu/compare_runs.py) into OUT/compare.md. One line per step with
# its exit status and wall time.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
before=$(realpath "$1"); after=$(realpath "$2"); out=$(realpath -m "$3")
mkdir -p "$out"
export NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}" PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH="$after/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
date -u
runs=/tmp/family-interface
step() {  # step NAME COMMAND...: its log under $out, its exit status and wall time printed
  local name=$1 start=$SECONDS; shift
  "$@" > "$out/$name.log" 2>&1
  echo "=== $name: exit $?, $((SECONDS - start)) s ($(date -u +%H:%M:%S))"
}
for side in before after; do
  bin=$before; [ $side = after ] && bin=$after
  step correctness-$side python3 "$repo/tests/gpu/execute_check.py" --twin "$bin/twin" --gpus 1 --only correctness \
    --out "$runs/$side/correctness"
done
for side in before after; do
  bin=$before; [ $side = after ] && bin=$after
  step speed-$side python3 "$repo/tests/gpu/execute_check.py" --twin "$bin/twin" --gpus 1 --only speed \
    --speed-cases 7b4l-mbs1-deterministic-attention --out "$runs/$side/speed"
done
step test_gpu timeout "${TEST_GPU_LIMIT_S:-60}" "$after/test_gpu" --gtest_brief=1
grep -hE "tests? (ran|PASSED|FAILED)|^\[  (PASSED|FAILED)" "$out/test_gpu.log"
python3 "$repo/tests/gpu/compare_runs.py" "$runs/before" "$runs/after" | tee "$out/compare.md"
date -u
