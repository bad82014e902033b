#!/usr/bin/env bash
# The clock and the expert loads of twin execute's MoE steps beside a dense one (issue 40 item 3, issue 37): each
# scenario named (default: the Qwen3-MoE- and DeepSeek-V3-shaped ones and the dense Llama-2-7B-width control)
# simulated with its shipped profile and its best plan run ITERS steps (default 30, 3 of them warm-up), keeping per
# run metrics.json (the per-layer expert loads), steps.csv, ops.csv, best.json and gpu_clocks.csv (nvidia-smi every
# 100 ms: SM clock, power, utilisation), and summary.md: each run's median SM clock and power over its busy samples
# beside its step time and the prediction.
# Usage (device): OUT=DIR bash tests/gpu/moe_clock_device.sh BIN [SCENARIO...]
set -uo pipefail
bin="$(cd "$1" && pwd)"; shift
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(scenarios/exec-qwen3-moe-small-1xH200.json
                                         scenarios/exec-deepseek-v3-nomla-small-1xH200.json
                                         scenarios/llama2-7b-4layers-bf16-1xH200.json)
OUT="${OUT:-out/moe-clock}"
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$bin/lib:${LD_LIBRARY_PATH:-}" NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
status=0
date -u +"start %FT%TZ" > "$OUT/run.log"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader >> "$OUT/run.log"
for scenario in "${scenarios[@]}"; do
  name=$(basename "$scenario" .json)
  run="/tmp/moe-clock/$name"
  rm -rf "$run"; mkdir -p "$run" "$OUT/$name"
  { "$bin/twin-gpu" simulate "$scenario" --out "$run" --quiet --top 0 &&
    "$bin/twin-gpu" execute --best --run "$run" --iters "${ITERS:-30}" --warmup 3; } > "$OUT/$name/run.log" 2>&1 ||
    status=1
  cp "$run"/metrics.json "$run"/steps.csv "$run"/best.json "$run"/ops.csv "$run"/gpu_clocks.csv "$OUT/$name/" 2>/dev/null
  date -u +"$name done %FT%TZ" >> "$OUT/run.log"
done
python3 - "$OUT" "${scenarios[@]}" > "$OUT/summary.md" <<'PY' || status=1
import csv, json, os, statistics, sys
out = sys.argv[1]
print("| scenario | iteration s | predicted s | error | busy samples | median SM MHz | median W |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for scenario in sys.argv[2:]:
    name = os.path.basename(scenario)[:-5]
    try:
        m = json.load(open(os.path.join(out, name, "metrics.json")))
        rows = [[c.strip() for c in r] for r in csv.reader(open(os.path.join(out, name, "gpu_clocks.csv")))]
    except (OSError, ValueError) as error:
        print(f"| {name} | FAILED: {error} | | | | | |")
        continue
    busy = [r for r in rows if len(r) >= 4 and float(r[3]) >= 90]
    measured, predicted = m["measured"]["iteration_s"], m["predicted"]["iteration_time_s"]
    mhz = statistics.median(float(r[1]) for r in busy) if busy else 0
    watts = statistics.median(float(r[2]) for r in busy) if busy else 0
    print(f"| {name} | {measured:.4f} | {predicted:.4f} | {100 * (measured / predicted - 1):+.1f}% | {len(busy)} | "
          f"{mhz:.0f} | {watts:.0f} |")
PY
cat "$OUT/summary.md" >> "$OUT/run.log"
exit $status
