#!/usr/bin/env bash
# The merged tree on one GPU in one device call, from the repository root with the binaries in $1 (twin, twin-gpu,
# test_gpu and lib/ as tests/gpu/make_carry.sh packs them): every GPU test, then the FP8 check
# (tests/gpu/fp8_check.sh: BF16 against FP8 linears), the GPT-style check (tests/gpu/gpt_device.sh), the FP8
# recipes (tests/gpu/fp8_recipes_check.sh: delayed scaling against BF16) and the MoE shapes
# (tests/gpu/moe_shapes_device.sh, the scenarios in MOE_SCENARIOS or its default), sliding-window attention
# (tests/gpu/swa_check.sh), multi-latent attention (tests/gpu/mla_execute_device.sh), Gemma's and Nemotron's layers
# (tests/gpu/gemma_nemotron_device.sh) and the power model (tests/gpu/power_model_device.sh: twin calibrate
# --sustained-clock writing power_model, the MoE and dense steps with their clocks); the GPU tests run once, first.
# STEPS (default: all) names the steps to run, space-separated, e.g. STEPS="test_gpu gemma power", so that the check
# splits over device calls of at most 10 minutes.
# Logs under OUT/{test_gpu.log,fp8/,gpt/,fp8_recipes/,moe/,swa/,mla/,gemma/,power/}; one line per step with its exit
# status and wall time.
# Usage (device): [STEPS="..."] bash tests/gpu/one_gpu_release_check.sh BIN OUT
set -uo pipefail
cd "$(dirname "$0")/../.."
bin="$(cd "$1" && pwd)"; out="$2"
mkdir -p "$out"
export LD_LIBRARY_PATH="$bin/lib:${LD_LIBRARY_PATH:-}" NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
status=0
steps="${STEPS:-test_gpu fp8 gpt fp8_recipes moe swa mla gemma power}"
step() {  # step NAME COMMAND...: runs when STEPS names it
  local name=$1 start=$SECONDS; shift
  case " $steps " in *" $name "*) ;; *) return 0 ;; esac
  "$@"; local rc=$?
  [ $rc -eq 0 ] || status=1
  echo "=== $name: exit $rc, $((SECONDS - start)) s ($(date -u +%H:%M:%S))"
}
step test_gpu sh -c "\"$bin/test_gpu\" > \"$out/test_gpu.log\" 2>&1"
grep -E "^\[  (PASSED|FAILED) |^\[  SKIPPED \] [0-9]|tests? ran" "$out/test_gpu.log"
grep -E "^\[  FAILED  \] " "$out/test_gpu.log" | head -20
step fp8 bash tests/gpu/fp8_check.sh "$bin" "$out/fp8" "${FP8_ITERS:-60}"
head -8 "$out/fp8/summary.md" 2>/dev/null
step gpt env OUT="$out/gpt" bash tests/gpu/gpt_device.sh "$bin"
head -20 "$out/gpt/gpt_check.md" 2>/dev/null
step fp8_recipes env GTEST_FILTER='-*' bash tests/gpu/fp8_recipes_check.sh "$bin" "$out/fp8_recipes" "${FP8_ITERS:-60}" \
  ${FP8_RECIPES:-delayed}
head -12 "$out/fp8_recipes/summary.md" 2>/dev/null
# shellcheck disable=SC2086  # MOE_SCENARIOS is a list
step moe env OUT="$out/moe" TESTS='-*' bash tests/gpu/moe_shapes_device.sh "$bin" ${MOE_SCENARIOS:-}
cat "$out/moe/summary.md" 2>/dev/null
step swa env OUT="$out/swa" TESTS='-*' bash tests/gpu/swa_check.sh "$bin"
cat "$out/swa/summary.md" 2>/dev/null
step mla env OUT="$out/mla" TESTS='-*' bash tests/gpu/mla_execute_device.sh "$bin"
cat "$out/mla/summary.md" 2>/dev/null
step gemma env OUT="$out/gemma" TESTS='-*' bash tests/gpu/gemma_nemotron_device.sh "$bin"
cat "$out/gemma/summary.md" 2>/dev/null
step power env OUT="$out/power" bash tests/gpu/power_model_device.sh "$bin"
cat "$out/power/run.log" 2>/dev/null
exit $status
