#!/usr/bin/env bash
# The second device call of issue 40 item 4, from the repository root with the binaries in $1 (as
# tests/gpu/moe_shapes_device.sh takes them) and the two one-H200 scenarios named after it: each model's best plan
# (micro-batch 4, no recompute) against itself under selective and full recompute (QK-norm and the shared experts
# run again in the recomputed forward) and, for a model with shared experts, residual fusion (their FC2 must not
# fuse the residual add), each ITERS steps (default 24): the loss curves' largest relative difference over the
# first half and of the second half's mean, held to TOLERANCE (default 0.02, execute_check.py's: routing is
# discrete, so curves part in late steps). Then the first scenario's own kernel shapes measured into the shipped
# profile (twin calibrate --scenario), its best plan predicted with that profile and run (CAL_ITERS, default 30).
# $OUT/variants.md, $OUT/calibrated.md, $OUT/runs.tar.gz (each run's metrics, steps, ops; no traces).
# Usage (device): OUT=DIR bash tests/gpu/moe_shapes_variants.sh BIN SCENARIO...
set -uo pipefail
bin="$(cd "$1" && pwd)"; shift
OUT="${OUT:-out/moe-variants}"; work=/tmp/moe-variants
mkdir -p "$OUT"; rm -rf "$work"; mkdir -p "$work"
export LD_LIBRARY_PATH="$bin/lib:${LD_LIBRARY_PATH:-}" NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
status=0
date -u +"start %FT%TZ" > "$OUT/run.log"
run_plan() {  # run_plan NAME SCENARIO [simulate options...]: simulated, its best.json run
  local name=$1 scenario=$2; shift 2
  { "$bin/twin-gpu" simulate "$scenario" --out "$work/$name" --quiet --top 0 "$@" &&
    "$bin/twin-gpu" execute --best --run "$work/$name" --iters "${ITERS:-24}" --warmup 3; } > "$work/$name.log" 2>&1 ||
    { status=1; echo "$name FAILED" >> "$OUT/run.log"; }
}
for scenario in "$@"; do
  name=$(basename "$scenario" .json)
  best=tp1.pp1.cp1.ep1.dp1.vpp1.nosp.mbs4.z0
  run_plan "$name-none" "$scenario" --plan-key "$best.rc-none.1f1b"
  run_plan "$name-selective" "$scenario" --plan-key "$best.rc-selective.1f1b"
  python3 - "$scenario" "$work/$name-full.json" "$work/$name-fusion.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
doc["search"]["recompute"], doc["search"]["micro_batch_size"] = ["full"], [4]
json.dump(doc, open(sys.argv[2], "w"))
doc["search"]["recompute"] = ["none"]
doc.setdefault("framework", {})["residual_fusion"] = True
json.dump(doc, open(sys.argv[3], "w"))
PY
  run_plan "$name-full" "$work/$name-full.json"
  if grep -q shared_expert_ffn_hidden_size "$scenario"; then run_plan "$name-fusion" "$work/$name-fusion.json"; fi
  date -u +"$name variants done %FT%TZ" >> "$OUT/run.log"
done
python3 - "$work" "${TOLERANCE:-0.02}" "$@" > "$OUT/variants.md" <<'PY' || status=1
import json, os, sys
work, tolerance = sys.argv[1], float(sys.argv[2])
def losses(run):
    with open(os.path.join(work, run, "metrics.json")) as f:
        return [s["loss"] for s in json.load(f)["steps"]]
print("| run | steps | loss first | loss last | first-half max diff | second-half mean diff | result |")
print("| --- | --- | --- | --- | --- | --- | --- |")
failed = False
for scenario in sys.argv[3:]:
    name = os.path.basename(scenario)[:-5]
    base = losses(f"{name}-none")
    for variant in ("none", "selective", "full", "fusion"):
        run = f"{name}-{variant}"
        if not os.path.isdir(os.path.join(work, run)):
            continue
        try:
            curve = losses(run)
        except (OSError, KeyError, ValueError):
            print(f"| {run} | FAILED | | | | | fail |"); failed = True; continue
        half = len(curve) // 2
        first = max(abs(a - b) / b for a, b in zip(curve[:half], base[:half]))
        second = abs(sum(curve[half:]) - sum(base[half:])) / sum(base[half:])
        ok = first <= tolerance and second <= tolerance and curve[-1] < 0.8 * curve[0]
        failed |= not ok
        print(f"| {run} | {len(curve)} | {curve[0]:.4f} | {curve[-1]:.4f} | {first:.2e} | {second:.2e} | "
              f"{'ok' if ok else 'FAIL'} |")
sys.exit(1 if failed else 0)
PY
first=$1; cal=$(basename "$first" .json)-calibrated
timeout "${CAL_TIMEOUT:-120}" "$bin/twin-gpu" calibrate --scenario "$first" --profile h200-x1 \
  --out "$work/h200-x1-plus.json" > "$work/calibrate.log" 2>&1 || status=1
date -u +"calibrated %FT%TZ" >> "$OUT/run.log"
ITERS=${CAL_ITERS:-30} run_plan "$cal" "$first" --profile "$work/h200-x1-plus.json"
python3 - "$work/$cal/metrics.json" > "$OUT/calibrated.md" <<'PY' || status=1
import json, sys
m = json.load(open(sys.argv[1]))
measured, predicted = m["measured"]["iteration_s"], m["predicted"]["iteration_time_s"]
print(f"calibrated profile: {len(m['steps'])} steps, loss {m['steps'][0]['loss']:.3f} -> {m['steps'][-1]['loss']:.3f}, "
      f"iteration {measured:.4f} s, predicted {predicted:.4f} s ({100 * (measured / predicted - 1):+.1f}%)")
PY
(cd "$work" && tar czf "$OUT/runs.tar.gz" --exclude=traces --exclude=measured --exclude='*.html' .)
cat "$OUT/variants.md" "$OUT/calibrated.md" >> "$OUT/run.log"
date -u +"end %FT%TZ status $status" >> "$OUT/run.log"
exit $status
