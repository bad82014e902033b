#!/usr/bin/env bash
# The device call of weight gradients added apart (framework.gradient_accumulation_fusion false), from the repository
# root with the binaries in $1 (twin-gpu, test_gpu and lib/ as tests/gpu/make_carry.sh packs them): its GPU test and
# the elementwise entry's beside it, then tests/gpu/gradient_accumulation_check.py. Logs and tables under $OUT.
set -uo pipefail
bin="$(cd "$1" && pwd)"
OUT="${OUT:-out/gradient-accumulation-device}"
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$bin/lib:${LD_LIBRARY_PATH:-}" NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
status=0
date -u +"start %FT%TZ" > "$OUT/run.log"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader >> "$OUT/run.log"
"$bin/test_gpu" --gtest_filter='GradientAccumulationGpu.*:KernelActivation.*' \
  > "$OUT/gradient_accumulation_test.log" 2>&1 || status=1
date -u +"tests done %FT%TZ" >> "$OUT/run.log"
python3 tests/gpu/gradient_accumulation_check.py --twin "$bin/twin-gpu" --out /tmp/gradient-accumulation-check \
  --iters "${ACCUMULATION_ITERS:-40}" > "$OUT/gradient_accumulation_check.log" 2>&1 || status=1
cp /tmp/gradient-accumulation-check/gradient_accumulation_check.{md,json,log} "$OUT/" 2>/dev/null
(cd /tmp/gradient-accumulation-check && tar czf "$OUT/runs.tar.gz" --exclude=traces --exclude=measured \
  --exclude='*.html' --exclude=profile.json */)
date -u +"end %FT%TZ status $status" >> "$OUT/run.log"
exit $status
