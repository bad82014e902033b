#!/usr/bin/env bash
# The device call of the loss without fusion (issue 42 item 4), from the repository root with the binaries in $1
# (twin-gpu, test_gpu and lib/ as tests/gpu/make_carry.sh packs them): its GPU tests, the fused loss's and the kernel
# calibration's beside them, then tests/gpu/unfused_loss_check.py. Logs and tables under $OUT.
set -uo pipefail
bin="$(cd "$1" && pwd)"
OUT="${OUT:-out/unfused-loss-device}"
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$bin/lib:${LD_LIBRARY_PATH:-}" NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
status=0
date -u +"start %FT%TZ" > "$OUT/run.log"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader >> "$OUT/run.log"
"$bin/test_gpu" --gtest_filter='*UnfusedCrossEntropy*:*KernelCrossEntropy*:KernelCalibration.*' \
  > "$OUT/unfused_loss_test.log" 2>&1 || status=1
date -u +"tests done %FT%TZ" >> "$OUT/run.log"
python3 tests/gpu/unfused_loss_check.py --twin "$bin/twin-gpu" --out /tmp/unfused-loss-check \
  --iters "${UNFUSED_ITERS:-40}" > "$OUT/unfused_loss_check.log" 2>&1 || status=1
cp /tmp/unfused-loss-check/unfused_loss_check.{md,json,log} "$OUT/" 2>/dev/null
(cd /tmp/unfused-loss-check && tar czf "$OUT/runs.tar.gz" --exclude=traces --exclude=measured --exclude='*.html' \
  --exclude=profile.json */)
date -u +"end %FT%TZ status $status" >> "$OUT/run.log"
exit $status
