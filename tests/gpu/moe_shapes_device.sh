#!/usr/bin/env bash
# The device call of issue 40 item 4 (the 2025-26 MoE shapes twin execute runs), from the repository root with the
# binaries in $1 (twin-gpu, test_gpu and lib/ as tests/gpu/make_carry.sh packs them): the GPU tests of QK-norm,
# the norms, the MoE kernels and the grouped GEMMs (fine-grained shapes among them) against their float64
# references; then each scenario named (default: the Qwen3-MoE- and DeepSeek-V3-shaped ones) simulated with its
# shipped profile and its best plan run ITERS steps (default 40, 3 of them warm-up). Logs, each run's metrics.json,
# steps.csv, ops.csv, predicted_vs_measured.json, best.json and ranking.csv, and summary.md (loss first and last, step time beside the prediction) under
# $OUT.
# Usage (device): OUT=DIR bash tests/gpu/moe_shapes_device.sh BIN [SCENARIO...]
set -uo pipefail
bin="$(cd "$1" && pwd)"; shift
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(scenarios/exec-qwen3-moe-small-1xH200.json
                                         scenarios/exec-deepseek-v3-nomla-small-1xH200.json)
OUT="${OUT:-out/moe-shapes}"
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$bin/lib:${LD_LIBRARY_PATH:-}" NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
status=0
date -u +"start %FT%TZ" > "$OUT/run.log"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader >> "$OUT/run.log"
"$bin/test_gpu" --gtest_filter="${TESTS:-*QkNorm*:*KernelNorm*:*KernelMoe*:*GroupedMatmul*:*SharedExpert*}" \
  > "$OUT/test_gpu.log" 2>&1 || status=1
grep -E "^\[  (PASSED|FAILED) |tests? ran" "$OUT/test_gpu.log" >> "$OUT/run.log"
date -u +"tests done %FT%TZ" >> "$OUT/run.log"
for scenario in "${scenarios[@]}"; do
  name=$(basename "$scenario" .json)
  run="/tmp/moe-shapes/$name"
  rm -rf "$run"; mkdir -p "$run" "$OUT/$name"
  { "$bin/twin-gpu" simulate "$scenario" --out "$run" --quiet --top 0 &&
    "$bin/twin-gpu" execute --best --run "$run" --iters "${ITERS:-40}" --warmup 3; } > "$OUT/$name/run.log" 2>&1 ||
    status=1
  cp "$run"/metrics.json "$run"/steps.csv "$run"/best.json "$run"/ranking.csv "$run"/ops.csv \
     "$run"/predicted_vs_measured.json "$OUT/$name/" 2>/dev/null
  date -u +"$name done %FT%TZ" >> "$OUT/run.log"
done
python3 - "$OUT" "${scenarios[@]}" > "$OUT/summary.md" <<'PY' || status=1
import json, os, sys
out = sys.argv[1]
print("| scenario | plan | steps | loss first | loss last | iteration s | predicted s | error | peak GiB | predicted GiB |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
failed = False
for scenario in sys.argv[2:]:
    name = os.path.basename(scenario)[:-5]
    try:
        with open(os.path.join(out, name, "metrics.json")) as f:
            m = json.load(f)
        with open(os.path.join(out, name, "best.json")) as f:
            s = json.load(f)["strategy"]
    except (OSError, KeyError, ValueError) as error:
        print(f"| {name} | FAILED: {error} | | | | | | | | |")
        failed = True
        continue
    losses = [step["loss"] for step in m["steps"]]
    measured, predicted = m["measured"]["iteration_s"], m["predicted"]["iteration_time_s"]
    plan = f"mbs {s.get('micro_batch_size')}, recompute {s.get('recompute')}"
    peak = max(r["peak_memory_GiB"] for r in m["ranks"])
    predicted_peak = max(r["predicted_peak_memory_GiB"] for r in m["ranks"])
    print(f"| {name} | {plan} | {len(losses)} | {losses[0]:.3f} | {losses[-1]:.3f} | {measured:.4f} | "
          f"{predicted:.4f} | {100 * (measured / predicted - 1):+.1f}% | {peak:.1f} | {predicted_peak:.1f} |")
    failed |= not losses[-1] < losses[0]
sys.exit(1 if failed else 0)
PY
cat "$OUT/summary.md" >> "$OUT/run.log"
date -u +"end %FT%TZ status $status" >> "$OUT/run.log"
exit $status
