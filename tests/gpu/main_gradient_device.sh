#!/usr/bin/env bash
# The device call of fp32 main gradients (framework.main_grad_dtype float32), from the repository root with the
# binaries in $1 (twin-gpu, test_gpu and lib/ as tests/gpu/make_carry.sh packs them): the kernels' GPU tests with
# fp32 gradients and their bf16 neighbours, then tests/gpu/main_gradient_check.py. Logs and tables under $OUT.
set -uo pipefail
bin="$(cd "$1" && pwd)"
OUT="${OUT:-out/main-gradient-device}"
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$bin/lib:${LD_LIBRARY_PATH:-}" NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
status=0
date -u +"start %FT%TZ" > "$OUT/run.log"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader >> "$OUT/run.log"
"$bin/test_gpu" --gtest_filter='*MainGradientFp32.*:*KernelOptimizer.*:*KernelBias*:*KernelEmbedding*:*KernelPositions*:*MatmulProducts*:*MatmulEpilogues*:*GradientAccumulationGpu.*:*GroupedMatmul.*' \
  > "$OUT/main_gradient_test.log" 2>&1 || status=1
date -u +"tests done %FT%TZ" >> "$OUT/run.log"
python3 tests/gpu/main_gradient_check.py --twin "$bin/twin-gpu" --out /tmp/main-gradient-check \
  --iters "${MAIN_GRADIENT_ITERS:-40}" > "$OUT/main_gradient_check.log" 2>&1 || status=1
cp /tmp/main-gradient-check/main_gradient_check.{md,json,log} "$OUT/" 2>/dev/null
(cd /tmp/main-gradient-check && tar czf "$OUT/runs.tar.gz" --exclude=traces --exclude=measured \
  --exclude='*.html' --exclude=profile.json */)
date -u +"end %FT%TZ status $status" >> "$OUT/run.log"
exit $status
