#!/usr/bin/env bash
# ZeRO-2/3's shards in twin execute on two GPUs (issue 42 item 4, issue 37 item 4), with the binaries in $1 (twin,
# test_gpu and lib/ as tests/gpu/make_carry.sh packs them), in one device call:
#   1. zero_memory_check.py: a 20B-width and a 3B-width plan at ZeRO 1, 2 and 3 (data parallel 2, four or two
#      micro-batches), measured peak against predicted per rank (3%), step against predicted, loss falling;
#   2. execute_check.py --only correctness on two GPUs: every case against the single-GPU curve (2e-2), ZeRO 0-3 with
#      two and four micro-batches, full recompute, reductions after the pass, TP, SP, PP;
#   3. execute_check.py --only tied (the tied one-stage ZeRO-3 case) and moe_check.py (ZeRO 2/3 with experts units);
#   4. test_gpu's ReshardingGpu.* and PerLayerUlyssesEdge.* (hot switching reads the shards), where test_gpu is packed.
# STEPS (default "memory correctness tied moe gtest") picks steps. Logs and tables in OUT (summary.log, *.md,
# zero-memory.tar.gz).
# Usage (device): OUT=DIR bash tests/gpu/zero_memory_device.sh BIN
set -uo pipefail
cd "$(dirname "$0")/../.."
bin="$(cd "$1" && pwd)"
OUT="${OUT:-out/zero-memory}"
work=/tmp/zero-memory
rm -rf "$work"; mkdir -p "$work" "$OUT"
export LD_LIBRARY_PATH="$bin/lib:${LD_LIBRARY_PATH:-}" NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
steps=" ${STEPS:-memory correctness tied moe gtest} "
summary="$OUT/summary.log"
status=0
{ date -u +"start %FT%TZ"; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader; } > "$summary"
step() {  # name, then the command
  local name="$1"; shift
  [[ "$steps" == *" $name "* ]] || return 0
  SECONDS=0
  "$@" > "$work/$name.log" 2>&1
  local rc=$?
  [ "$rc" -eq 0 ] || status=1
  echo "$name: exit $rc, ${SECONDS}s" >> "$summary"
}
step memory python3 tests/gpu/zero_memory_check.py --twin "$bin/twin" --out "$work/memory" \
  "scenarios/accuracy-internlm2-20b-widths-2xH200.json:tp1.pp1.cp1.ep1.dp2.vpp1.nosp.mbs1.z{}.rc-none.1f1b" \
  "scenarios/accuracy-llama32-3b-widths-2xH200.json:tp1.pp1.cp1.ep1.dp2.vpp1.nosp.mbs2.z{}.rc-none.1f1b"
cp "$work/memory/zero_memory.md" "$OUT/" 2>/dev/null
step correctness python3 tests/gpu/execute_check.py --twin "$bin/twin" --gpus 2 --only correctness --iters 8 \
  --out "$work/correctness"
step tied python3 tests/gpu/execute_check.py --twin "$bin/twin" --gpus 2 --only tied --iters 8 --out "$work/tied"
step moe python3 tests/gpu/moe_check.py --twin "$bin/twin" --gpus 2 --iters 8 --out "$work/moe" \
  --only moe-single,moe-dp2,moe-dp2-zero2,moe-dp2-zero3,moe-ep2-zero1,moe-ep2-zero3
if [ -x "$bin/test_gpu" ]; then
  step gtest "$bin/test_gpu" --gtest_filter='ReshardingGpu.*:PerLayerUlyssesEdge.*'
fi
for f in "$work"/correctness/*.md "$work"/tied/*.md "$work"/moe/*.md; do [ -f "$f" ] && cp "$f" "$OUT/$(basename "$(dirname "$f")")-$(basename "$f")"; done
grep -hE "^\[  (PASSED|FAILED) |tests? ran" "$work/gtest.log" >> "$summary" 2>/dev/null
date -u +"end %FT%TZ status $status" >> "$summary"
tar -C "$work" --exclude='traces' --exclude='*.json.gz' --exclude='ops.csv' -czf "$OUT/zero-memory.tar.gz" . 2>/dev/null
exit $status
