#!/usr/bin/env bash
# twin execute records the clock its GPUs held (executor/gpu/clock_sampler.hpp) and twin calibrate --from-trace
# folds it (recalibration rule 0), on one GPU: a short run of a pinned 13B-width plan must leave RUN/gpu_clocks.csv
# with busy samples, no nvidia-smi running after it, and a fold whose changes name sustained_sm_clock_MHz at a
# clock below the profile's reference. Usage (device): TWIN=build-carry/twin bash tests/gpu/clock_sampler_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-out/clock-sampler-check}"
mkdir -p "$OUT"
twin="${TWIN:-build-carry/twin}"
[ -d "$(dirname "$twin")/lib" ] && export LD_LIBRARY_PATH="$PWD/$(dirname "$twin")/lib:${LD_LIBRARY_PATH:-}"
export NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
fail() { echo "FAIL: $*"; exit 1; }
"$twin" simulate scenarios/accuracy-llama2-13b-1xH100.json --out "$OUT/plan" --top 1 --quiet || fail "simulate"
# The run folder is the plan's (the fold reads its best.json).
"$twin" execute --plan "$OUT/plan/best.json" --iters 8 --warmup 2 > "$OUT/execute.log" 2>&1 ||
  fail "execute (see execute.log)"
[ -s "$OUT/plan/gpu_clocks.csv" ] || fail "no gpu_clocks.csv in the run folder"
[ ! -e "$OUT/plan/gpu_clocks.csv.part" ] || fail "the partial file was left"
busy=$(awk -F', ' '$4 >= 90' "$OUT/plan/gpu_clocks.csv" | wc -l)
echo "gpu_clocks.csv: $(wc -l < "$OUT/plan/gpu_clocks.csv") samples, $busy busy"
[ "$busy" -ge 5 ] || fail "fewer than 5 busy samples"
pgrep -x nvidia-smi > /dev/null && fail "an nvidia-smi is still running"
"$twin" calibrate --from-trace "$OUT/plan" --profile h100-x1 --out "$OUT/profile.json" > "$OUT/fold.log" 2>&1 ||
  fail "fold (see fold.log)"
line=$(grep sustained_sm_clock_MHz "$OUT/profile.changes.md") || fail "the fold set no sustained clock"
echo "$line"
clock=$(python3 -c "import json; print(json.load(open('$OUT/profile.json'))['gpus'][0]['sustained_sm_clock_MHz'])")
reference=$(python3 -c "import json; print(json.load(open('$OUT/profile.json'))['gpus'][0]['reference_sm_clock_MHz'])")
python3 -c "import sys; sys.exit(0 if 500 < $clock < $reference else 1)" || fail "clock $clock MHz not in (500, $reference)"
echo "PASS: sustained clock $clock MHz folded (reference $reference MHz)"
