#!/usr/bin/env bash
# Issue 41 items 2 and 3 on one Hopper GPU, in one device call: the FP8 GPU tests, `twin calibrate` of the FP8 and
# BF16 twin scenarios (Llama-2-7B widths, 4 layers) added to the shipped H200 profile, `twin calibrate
# --sustained-clock` (the clock curves under BF16 and under FP8 GEMMs, measured on this GPU now), `twin
# simulate` of both with that profile, and `twin execute` of both plans; then the measured and predicted FP8
# speed-ups and the loss curves side by side (OUT/summary.md). The shipped profile's traced shapes hold the training
# clock of the runs they were folded from, so the curves do not price its steps; the summary also predicts both
# steps from its micro-benchmarks alone (tests/gpu/fp8_benchmark_profiles.py; the scenarios' shapes then calibrated
# into it too, and the curves measured into it), with both curves and with the BF16 curve alone. nvidia-smi
# samples clock, power and the clock-event reasons every 100 ms throughout (OUT/smi.csv).
#   bash tests/gpu/fp8_check.sh BIN OUT [ITERS]
# BIN: a folder made by tests/gpu/make_carry.sh (twin, twin-gpu, test_gpu, lib/); ITERS default 60 (5 warm-up).
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(realpath "$1"); out=$(realpath -m "$2"); iters=${3:-60}
mkdir -p "$out"
export LD_LIBRARY_PATH=$bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
export CUBLASLT_LOG_LEVEL="${CUBLASLT_LOG_LEVEL:-1}"  # cuBLASLt's errors (why it refuses a GEMM) into the logs
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
date -u
SECONDS=0
step() {  # step NAME COMMAND...: its log under $out, its exit and wall time printed
  local name=$1 start=$SECONDS; shift
  "$@" > "$out/$name.log" 2>&1
  echo "$name: exit $?, $((SECONDS - start)) s"
}
smi_fields=timestamp,clocks.sm,power.draw,temperature.gpu,utilization.gpu,clocks_event_reasons.active
nvidia-smi --query-gpu=$smi_fields --format=csv,noheader,nounits -lms 100 > "$out/smi.csv" 2> "$out/smi.err" &
smi=$!
trap 'kill $smi 2>/dev/null || true' EXIT
step test_gpu "$bin/test_gpu" --gtest_filter='*Fp8*:KernelCalibration*:*Matmul*:*SustainedClock*'
grep -hE "\[kernel-error\]|tests? (ran|PASSED|FAILED)|^\[  (PASSED|FAILED)" "$out/test_gpu.log"
profile=$out/h200-fp8.json
cp "$repo/cost/profiles/h200-x1.json" "$profile"
bench=$out/bench-curves.json
python3 "$repo/tests/gpu/fp8_benchmark_profiles.py" benchmarks "$profile" "$bench"
for precision in fp8 bf16; do
  for p in "$profile" "$bench"; do
    step calibrate-$precision-$(basename "$p" .json) "$bin/twin" calibrate \
      --scenario "$repo/scenarios/llama2-7b-4layers-$precision-1xH200.json" --profile "$p"
  done
done
date -u +"sustained clock from %FT%TZ"
step sustained-clock "$bin/twin" calibrate --sustained-clock --profile "$bench"
date -u +"sustained clock to %FT%TZ"
grep -h "sustained clock (" "$out/sustained-clock.log" | grep -v "GPU 0" | sed 's/.*\[calibrate\] //'
python3 "$repo/tests/gpu/fp8_benchmark_profiles.py" bf16-curve "$bench" "$out/bench-bf16-curve.json"
for variant in bench-curves bench-bf16-curve; do
  for precision in bf16 fp8; do
    step simulate-$variant-$precision "$bin/twin" simulate "$repo/scenarios/llama2-7b-4layers-$precision-1xH200.json" \
      --profile "$out/$variant.json" --out "$out/sim-$variant-$precision" --top 0 --quiet
  done
done
for precision in bf16 fp8; do
  run=$out/run-$precision
  step simulate-$precision "$bin/twin" simulate "$repo/scenarios/llama2-7b-4layers-$precision-1xH200.json" \
    --profile "$profile" --out "$run" --top 0 --quiet
  date -u +"execute-$precision from %FT%TZ"
  step execute-$precision "$bin/twin" execute --plan "$run/best.json" --run "$run" --iters "$iters" --warmup 5
  date -u +"execute-$precision to %FT%TZ"
done
kill $smi 2>/dev/null || true
python3 "$repo/tests/gpu/fp8_summary.py" "$out" bf16 fp8 | tee "$out/summary.md"
date -u
