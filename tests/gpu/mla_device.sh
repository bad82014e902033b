#!/usr/bin/env bash
# The device call of issue 40 item 4's MLA part: the GPU tests of multi-latent attention (its kernels, cuDNN's
# attention with d_v != d_qk, the whole block forward and backward against float64) and of what MLA changed beside
# them (attention of every backend, context parallelism's ring, RoPE, QK-norm), from the repository root with the
# binaries in $1 (test_gpu and lib/ as tests/gpu/make_carry.sh packs them). Logs under $OUT: run.log (GPU, dates,
# pass/fail lines) and test_gpu.log (every [kernel-error] line).
# Usage (device): OUT=DIR bash tests/gpu/mla_device.sh BIN
set -uo pipefail
bin="$(cd "$1" && pwd)"
OUT="${OUT:-out/mla}"
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$bin/lib:${LD_LIBRARY_PATH:-}" NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
status=0
date -u +"start %FT%TZ" > "$OUT/run.log"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader >> "$OUT/run.log"
filter="${TESTS:-*Mla*:Shapes/Attention.*:AttentionDeterminism.*:*RingAttention*:KernelRope*:*QkNorm*}"
timeout "${LIMIT_S:-240}" "$bin/test_gpu" --gtest_filter="$filter" > "$OUT/test_gpu.log" 2>&1 || status=1
grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests? ran|\[kernel-error\] (mla|attention)" "$OUT/test_gpu.log" >> "$OUT/run.log"
date -u +"end %FT%TZ status $status" >> "$OUT/run.log"
exit $status
