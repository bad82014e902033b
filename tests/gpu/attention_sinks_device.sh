#!/usr/bin/env bash
# The device check of attention sinks in twin execute (issue 40 item 1: gpt-oss's learned sink per head), from the
# repository root with the binaries in $1 (twin-gpu, test_gpu and lib/ as tests/gpu/make_carry.sh packs them):
#   1. the GPU tests of attention with sinks against their float64 reference (every backend, GQA, windows, a soft
#      cap, head dim 256 on cuDNN; the sinks' gradient, accumulated, the same bits twice; the reference's sink
#      gradient against central differences), the plain attention tests and the op-to-kernel dimensions:
#      test_gpu.log;
#   2. scenarios/exec-gptoss-sinks-small-1xH200.json (gpt-oss-20b-shaped attention with its sinks) and the same
#      model with the sinks off (written to $OUT/exec-gptoss-nosinks-small-1xH200.json), each simulated with the
#      shipped profile (blind) and its best plan run ITERS steps (tests/gpu/moe_shapes_device.sh): summary.md, loss
#      first and last, step measured beside predicted;
#   3. attention.md: each run's attention ops, CUPTI-measured beside the price;
#   4. twin calibrate --scenario of the sinks scenario over the shipped profile (its attention shapes with sinks
#      timed through the executor's entry): calibrate.log, the profile (sinks-profile.json) and its attention keys
#      (keys.txt), so that the run can be re-predicted off the machine (tools/repredict_runs.py).
# Usage (device): OUT=DIR bash tests/gpu/attention_sinks_device.sh BIN
set -uo pipefail
bin="$(cd "$1" && pwd)"
OUT="${OUT:-out/attention-sinks}"
mkdir -p "$OUT"
sinks=scenarios/exec-gptoss-sinks-small-1xH200.json
plain="$OUT/exec-gptoss-nosinks-small-1xH200.json"
python3 tests/gpu/scenario_variant.py "$sinks" "$plain" "; the sinks off" '{"attention_sinks": false}'
TESTS="${TESTS:-*AttentionSinks*:*Attention.*:*AttentionOpDims*:AttentionDeterminism.*:AttentionWindow.*}" OUT="$OUT" \
  exec bash tests/gpu/attention_variant_device.sh "$bin" "$sinks" "$plain" sinks-profile.json
