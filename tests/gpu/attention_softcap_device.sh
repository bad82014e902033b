#!/usr/bin/env bash
# The device check of soft-capped attention scores in twin execute (issue 40 item 1: Gemma-2's
# attn_logit_softcapping), from the repository root with the binaries in $1 (twin-gpu, test_gpu and lib/ as
# tests/gpu/make_carry.sh packs them):
#   1. the GPU tests of attention against their float64 references (every backend with and without the cap, head dim
#      256 on the cuDNN backends, windows, the reference's capped gradient against central differences) and the
#      op-to-kernel dimensions of calibration and the executor: test_gpu.log;
#   2. scenarios/exec-gemma2-softcap-small-1xH200.json (the Gemma-2-9B-shaped model with its cap of 50) and
#      scenarios/exec-gemma2-small-1xH200.json (the same with the cap off), each simulated with the shipped profile
#      (blind) and its best plan run ITERS steps (tests/gpu/moe_shapes_device.sh): summary.md, loss first and last,
#      step measured beside predicted;
#   3. attention.md: each run's attention ops, CUPTI-measured beside the price;
#   4. twin calibrate --scenario of the capped scenario over the shipped profile (its capped attention shapes timed
#      through the executor's entry): calibrate.log, the profile (capped-profile.json) and the attention keys it
#      measured (keys.txt), so that the capped run can be re-predicted off the machine (tools/repredict_runs.py).
# Usage (device): OUT=DIR bash tests/gpu/attention_softcap_device.sh BIN
set -uo pipefail
bin="$(cd "$1" && pwd)"
OUT="${OUT:-out/attention-softcap}"
mkdir -p "$OUT"
capped=scenarios/exec-gemma2-softcap-small-1xH200.json
plain=scenarios/exec-gemma2-small-1xH200.json
TESTS="${TESTS:-*Attention.*:*AttentionReferenceSoftcap.*:*AttentionOpDims*:AttentionDeterminism.*:AttentionWindow.*}" OUT="$OUT" \
  exec bash tests/gpu/attention_variant_device.sh "$bin" "$capped" "$plain" capped-profile.json
