#!/usr/bin/env bash
# MLA's per-op binding under recompute and without the query latent, on one GPU, from the repository root with the
# binaries in $1 (tests/gpu/make_carry.sh): scenarios/exec-deepseek-v3-mla-small-1xH200.json pinned to micro-batch 4
# without recompute, with selective recompute (attention's forward repeated in the backward from the saved q, k, v),
# and with the direct query projection (q_lora_rank 0, DeepSeek-V2-Lite's form), each simulated with its shipped
# profile and run ITERS steps with --attention cudnn-deterministic (bit-reproducible: the first two must give the
# same losses, bit for bit). Under $OUT: run.log (the comparison, each run's loss first and last, step time beside
# the prediction) and steps.tgz (each run's steps.csv and metrics.json).
# Usage (device): OUT=DIR bash tests/gpu/mla_recompute_device.sh BIN
set -uo pipefail
bin="$(cd "$1" && pwd)"
OUT="${OUT:-out/mla-recompute}"
work=/tmp/mla-recompute
mkdir -p "$OUT"; rm -rf "$work"; mkdir -p "$work"
export LD_LIBRARY_PATH="$bin/lib:${LD_LIBRARY_PATH:-}" NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
date -u +"start %FT%TZ" > "$OUT/run.log"
python3 - scenarios/exec-deepseek-v3-mla-small-1xH200.json "$work" <<'PY'
import json, sys
base = json.load(open(sys.argv[1]))
for name, recompute, q_lora_rank in (("none", "none", None), ("selective", "selective", None), ("direct", "none", 0)):
    s = json.loads(json.dumps(base))
    s["search"]["micro_batch_size"] = [4]
    s["search"]["recompute"] = [recompute]
    if q_lora_rank is not None:
        s["model"]["mla"]["q_lora_rank"] = q_lora_rank
    json.dump(s, open(f"{sys.argv[2]}/{name}.json", "w"), indent=1)
PY
status=0
for name in none selective direct; do
  { "$bin/twin-gpu" simulate "$work/$name.json" --out "$work/$name" --quiet --top 0 &&
    "$bin/twin-gpu" execute --best --run "$work/$name" --iters "${ITERS:-30}" --warmup 3 --no-trace \
      --attention cudnn-deterministic; } > "$work/$name.log" 2>&1 || status=1
  tail -3 "$work/$name.log" >> "$OUT/run.log"
done
python3 - "$work" >> "$OUT/run.log" <<'PY' || status=1
import csv, sys
runs = {n: list(csv.DictReader(open(f"{sys.argv[1]}/{n}/steps.csv"))) for n in ("none", "selective", "direct")}
same = [a["loss"] == b["loss"] for a, b in zip(runs["none"], runs["selective"])]
print(f"selective recompute: {sum(same)} of {len(same)} losses bit-identical to no recompute")
for n, steps in runs.items():
    print(f"{n}: loss {steps[0]['loss']} -> {steps[-1]['loss']} over {len(steps)} steps")
direct_falls = float(runs["direct"][-1]["loss"]) < float(runs["direct"][0]["loss"])
sys.exit(0 if all(same) and len(same) > 0 and direct_falls else 1)
PY
tar czf "$OUT/steps.tgz" -C "$work" none/steps.csv none/metrics.json selective/steps.csv selective/metrics.json \
  direct/steps.csv direct/metrics.json none.log selective.log direct.log 2>/dev/null || status=1
date -u +"end %FT%TZ status $status" >> "$OUT/run.log"
exit $status
