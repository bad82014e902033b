#!/usr/bin/env bash
# The device call of the optimizer step's main-gradient dtype (Op::main_gradient_bytes, framework.main_grad_dtype),
# from the repository root with the binaries in $1 (twin-gpu, test_gpu and lib/ as tests/gpu/make_carry.sh packs
# them): the GPU tests of the optimizer's kernels and bench; the kernel grid's shapes the shipped h200-x1 profile lacks
# timed into a copy of it (`twin calibrate --profile`: since the fp32-gradient optimizer steps were shipped on
# 2026-12-03, the 12 FP8 delayed-cast and transpose sizes the profile leaves out; a check that the grid runs); then tests/gpu/main_gradient_check.py, priced with the shipped profile by name, so that each case's fold
# goes to its own run folder (a profile file given by path would take every case's fold in turn, and the later cases
# would be priced with the earlier ones' runs). Logs and tables under $OUT.
set -uo pipefail
bin="$(cd "$1" && pwd)"
OUT="${OUT:-out/optimizer-gradient-device}"
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$bin/lib:${LD_LIBRARY_PATH:-}" NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
status=0
date -u +"start %FT%TZ" > "$OUT/run.log"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader >> "$OUT/run.log"
"$bin/test_gpu" --gtest_filter='KernelCalibration.OptimizerStep*:KernelOptimizer.*:MainGradientFp32.*:GradientAccumulationGpu.*' \
  > "$OUT/tests.log" 2>&1 || status=1
date -u +"tests done %FT%TZ" >> "$OUT/run.log"
"$bin/twin-gpu" calibrate --profile cost/profiles/h200-x1.json --out "$OUT/h200-x1.json" > "$OUT/calibrate.log" 2>&1 \
  || status=1
date -u +"calibrated %FT%TZ" >> "$OUT/run.log"
python3 tests/gpu/main_gradient_check.py --twin "$bin/twin-gpu" --profile h200-x1 \
  --out /tmp/optimizer-gradient-check --iters "${MAIN_GRADIENT_ITERS:-40}" > "$OUT/main_gradient_check.log" 2>&1 || status=1
cp /tmp/optimizer-gradient-check/main_gradient_check.{md,json,log} "$OUT/" 2>/dev/null
date -u +"end %FT%TZ status $status" >> "$OUT/run.log"
exit $status
