#!/usr/bin/env bash
# Issue 43 items 1, 2 and 5 on a GPU machine, in one call: the batched GEMM timing against the one-by-one timing
# (test_gpu's GemmBatchTimer test, its CSV), `twin calibrate` on every GPU and on one (the one-GPU run interrupted
# with SIGINT, refused when asked to continue with other arguments, then continued), `--scenario S --profile P`
# adding only the shapes P lacks, and the binary before these changes (before/twin-gpu, cut at BEFORE_SECONDS: its
# rate from its per-GEMM lines). Run from a folder holding bin/ (tests/gpu/make_carry.sh), scenarios/ and,
# optionally, before/twin-gpu. Logs and profiles go to $WORK, packed into $OUT/results.tar.gz after every step.
set -uo pipefail
OUT="${OUT:-out/calibrate-speed}"
WORK="${WORK:-/tmp/calibrate-speed}"
mkdir -p "$OUT" "$WORK"
export NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
twin="${TWIN:-bin/twin-gpu}"  # the GPU binary itself (bin/twin hands over to it)
scenario="${SCENARIO:-scenarios/llama3-8b-4xH200.json}"
steps="${STEPS:-test all one increment before}"  # which parts to run
wants() { [[ " $steps " == *" $1 "* ]]; }
pack() { tar czf "$OUT/results.tar.gz" -C "$(dirname "$WORK")" "$(basename "$WORK")"; }
step() { pack; echo; echo "=== $* ($(date -u +%H:%M:%S))"; }
timed() {  # timed NAME COMMAND...: its log in $WORK/NAME.log, wall seconds and exit code in $WORK/times.txt
  local name=$1 start=$SECONDS; shift
  "$@" > "$WORK/$name.log" 2>&1; local rc=$?
  echo "$name rc=$rc wall_s=$((SECONDS - start))" | tee -a "$WORK/times.txt"
  tail -4 "$WORK/$name.log"
}
step machine
nvidia-smi --query-gpu=index,name,memory.total,driver_version,clocks.max.sm --format=csv,noheader
if wants test; then
  step "batched vs one-by-one GEMM timing"
  TWIN_GEMM_BATCH_CSV="$WORK/batch_vs_one_by_one.csv" timed gemm_batch_test bin/test_gpu --gtest_filter='GemmBatchTimer.*'
  grep -h "shapes: one by one" "$WORK/gemm_batch_test.log"
fi
if wants all; then
  step "twin calibrate on every GPU"
  timed calibrate_all "$twin" calibrate --out "$WORK/p-all.json"
  grep "GPUs agree" "$WORK/calibrate_all.log"
fi
if wants one; then
  step "twin calibrate on one GPU, interrupted, refused with other arguments, continued"
  timed calibrate_one_cut timeout -s INT "${CUT_SECONDS:-45}" "$twin" calibrate --gpus 1 --out "$WORK/p-one.json"
  ls -la "$WORK"/p-one.json* 2>&1
  timed calibrate_one_other_args "$twin" calibrate --gpus 1 --quick --out "$WORK/p-one.json"
  timed calibrate_one_resumed "$twin" calibrate --gpus 1 --out "$WORK/p-one.json"
  ls "$WORK"/p-one.json* 2>&1
fi
if wants increment; then
  step "--scenario $scenario --profile: only the shapes the profile lacks"
  timed calibrate_increment "$twin" calibrate --scenario "$scenario" --profile "$WORK/p-all.json" --out "$WORK/p-all-s.json"
fi
if wants before && [ -x before/twin-gpu ]; then
  step "before: the binary before these changes on one GPU, cut at ${BEFORE_SECONDS:-30} s"
  timed before_one timeout -s INT "${BEFORE_SECONDS:-30}" before/twin-gpu calibrate --gpus 1 --out "$WORK/before.json"
  grep -c "\] GEMM [0-9]" "$WORK/before_one.log"
  grep -m1 "\] GEMM 1/" "$WORK/before_one.log"; grep "\] GEMM [0-9]" "$WORK/before_one.log" | tail -1
fi
step summary
python3 - "$WORK" <<'PY'
import json, sys
work = sys.argv[1]
for name in ("p-all.json", "p-one.json", "p-all-s.json"):
    try:
        p = json.load(open(f"{work}/{name}"))["provenance"]
    except Exception as e:
        print(name, "unreadable:", e); continue
    print(name, {k: p.get(k) for k in ("gpu_count", "calibration_seconds", "gemm_shapes_measured",
                                       "gemm_reference_sm_clock_MHz", "gemm_best_tflops")})
    agreement = p.get("gemm_gpu_agreement")
    if agreement:
        print("  agreement:", {k: agreement[k] for k in agreement if k != "shapes"})
    for inc in p.get("increments", []):
        print("  increment:", {k: inc[k] for k in inc if k != "gemm_gpu_agreement"})
# The same shapes timed by the all-GPU and the one-GPU calibration (each at its own reference clock).
try:
    a = json.load(open(f"{work}/p-all.json"))["gpus"][0]["measured"]
    b = json.load(open(f"{work}/p-one.json"))["gpus"][0]["measured"]
    r = [a[k]["median_ns"] / b[k]["median_ns"] - 1 for k in a if k.startswith("gemm") and k in b]
    print(f"all GPUs vs one GPU, {len(r)} GEMM shapes: mean {100*sum(r)/len(r):+.2f}%, "
          f"mean |d| {100*sum(map(abs, r))/len(r):.2f}%, max |d| {100*max(map(abs, r)):.2f}%")
except Exception as e:
    print("all GPUs vs one GPU: not compared:", e)
# Against the profile shipped from the one-by-one protocol (another H200, 2026-11-23): scaled to one clock.
try:
    old = json.load(open("h200-x1.json"))["gpus"][0]
    for name in ("p-one.json", "p-all.json"):
        new = json.load(open(f"{work}/{name}"))["gpus"][0]
        scale = new["reference_sm_clock_MHz"] / old["reference_sm_clock_MHz"]
        r = [new["measured"][k]["median_ns"] * scale / old["measured"][k]["median_ns"] - 1
             for k in new["measured"] if k.startswith("gemm") and k in old["measured"]]
        print(f"{name} vs shipped h200-x1 at one clock, {len(r)} GEMM shapes: mean {100*sum(r)/len(r):+.2f}%, "
              f"mean |d| {100*sum(map(abs, r))/len(r):.2f}%, max |d| {100*max(map(abs, r)):.2f}%")
except Exception as e:
    print("against h200-x1: not compared:", e)
PY
cat "$WORK/times.txt"
pack
