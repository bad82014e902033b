#!/usr/bin/env bash
# The device check of sliding-window attention (issue 40 item 1), from the repository root with the binaries in $1
# (twin-gpu, test_gpu and lib/ as tests/gpu/make_carry.sh packs them):
#   1. the attention GPU tests of windows against the float64 reference (every backend), a window of the whole
#      sequence giving the causal bits, and calibration's and the executor's kernel dimensions of each op agreeing;
#   2. scenarios/exec-mistral-swa-small-1xH200.json (a window of 4096 keys at seq 16384) simulated with its shipped
#      profile and its best plan run ITERS steps, and the same model causal (window_size 0), under cuDNN's default
#      attention; scenarios/exec-alternating-swa-small-1xH200.json (layer 0 windowed, layer 1 full) the same way;
#      the causal model and the window of the whole sequence (window_size = seq_length) under cudnn-deterministic
#      (bit-reproducible: cuDNN's atomic dQ parts the two curves within a few steps): the two loss curves agree
#      within the dense checks' tolerance (tests/gpu/execute_check.py curve_differences, 2%), bit for bit expected;
#   3. twin calibrate --scenario of the windowed scenario over the shipped profile, and the scenario simulated again
#      with the result: the step predicted before and after beside the measured one;
#   4. swa_ops.md: each run's attention ops by layer, CUPTI-measured median time beside the price (shipped profile),
#      and the calibrated profile's entry for the windowed keys.
# Logs, the runs' metrics.json, steps.csv, ops.csv and the calibrated profile (h200-x1-swa.json) under $OUT; summary.md
# and swa_ops.md the tables.
# Usage (device): OUT=DIR bash tests/gpu/swa_check.sh BIN
set -uo pipefail
bin="$(cd "$1" && pwd)"
here="$(cd "$(dirname "$0")" && pwd)"
OUT="${OUT:-out/swa}"
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$bin/lib:${LD_LIBRARY_PATH:-}" NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
status=0
log() { date -u +"$1 %FT%TZ" >> "$OUT/run.log"; }
log start
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader >> "$OUT/run.log"
readlink -f "$(ldconfig -p | awk '/libcudnn\.so\.9 /{print $NF; exit}')" >> "$OUT/run.log"  # the device's cuDNN
"$bin/test_gpu" --gtest_filter="${TESTS:-Windows/Attention.*:AttentionWindow.*:*AttentionOpDims*:AttentionSpeed.*}" \
  > "$OUT/test_gpu.log" 2>&1 || status=1
grep -E "^\[  (PASSED|FAILED) |tests? ran|kernel-speed" "$OUT/test_gpu.log" >> "$OUT/run.log"
log "tests done"

swa=scenarios/exec-mistral-swa-small-1xH200.json
work=/tmp/swa-check
rm -rf "$work"; mkdir -p "$work"
# The causal model and the window of the whole sequence: the windowed scenario with window_size replaced.
python3 - "$swa" "$work" <<'PY'
import json, sys
scenario = json.load(open(sys.argv[1]))
for name, window in (("causal", 0), ("whole", scenario["training"]["seq_length"])):
    scenario["model"]["window_size"] = window
    json.dump(scenario, open(f"{sys.argv[2]}/{name}.json", "w"), indent=1)
PY
run_one() {  # NAME SCENARIO ATTENTION: simulate, then execute the best plan with that attention implementation
  local name="$1" scenario="$2" attention="$3" run="$work/$1"
  mkdir -p "$run" "$OUT/$name"
  { "$bin/twin-gpu" simulate "$scenario" --out "$run" --quiet --top 0 &&
    "$bin/twin-gpu" execute --best --run "$run" --iters "${ITERS:-20}" --warmup 3 --attention "$attention"; } \
    > "$OUT/$name/run.log" 2>&1 || status=1
  cp "$run"/metrics.json "$run"/steps.csv "$run"/best.json "$run"/ops.csv "$OUT/$name/" 2>/dev/null
  log "$name done"
}
run_one swa "$swa" cudnn
run_one causal "$work/causal.json" cudnn
run_one alternating scenarios/exec-alternating-swa-small-1xH200.json cudnn
run_one causal-deterministic "$work/causal.json" cudnn-deterministic
run_one whole-deterministic "$work/whole.json" cudnn-deterministic
"$bin/twin-gpu" calibrate --scenario "$swa" --profile h200-x1 --out "$work/calibrated.json" \
  > "$OUT/calibrate.log" 2>&1 || status=1
log "calibrate done"
"$bin/twin-gpu" simulate "$swa" --profile "$work/calibrated.json" --out "$work/swa-calibrated" --quiet --top 0 \
  > "$OUT/simulate-calibrated.log" 2>&1 || status=1
cp "$work/swa-calibrated/best.json" "$OUT/swa/best-calibrated.json" 2>/dev/null
cp "$work/calibrated.json" "$OUT/h200-x1-swa.json" 2>/dev/null

python3 - "$OUT" "$work/calibrated.json" "$here" > "$OUT/summary.md" 2> "$OUT/summary.err" <<'PY' || status=1
import csv, json, os, sys
out, calibrated, here = sys.argv[1:4]
sys.path.insert(0, here)
from execute_check import curve_differences
def metrics(name):
    return json.load(open(os.path.join(out, name, "metrics.json")))
def losses(m):
    return [step["loss"] for step in m["steps"]]
ok = True
print("| run | steps | loss first | loss last | iteration s | predicted s (h200-x1) | error |")
print("| --- | --- | --- | --- | --- | --- | --- |")
runs = {}
for name in ("swa", "causal", "alternating", "causal-deterministic", "whole-deterministic"):
    try:
        m = runs[name] = metrics(name)
    except (OSError, ValueError) as error:
        print(f"| {name} | FAILED: {error} | | | | | |")
        ok = False
        continue
    l, measured, predicted = losses(m), m["measured"]["iteration_s"], m["predicted"]["iteration_time_s"]
    print(f"| {name} | {len(l)} | {l[0]:.4f} | {l[-1]:.4f} | {measured:.4f} | {predicted:.4f} | "
          f"{100 * (measured / predicted - 1):+.1f}% |")
    ok &= l[-1] < l[0]
if "causal-deterministic" in runs and "whole-deterministic" in runs:
    a, b = losses(runs["whole-deterministic"]), losses(runs["causal-deterministic"])
    first_half, whole = curve_differences(a, b)
    same = whole <= 0.02
    print(f"\nwindow of the whole sequence against causal (cudnn-deterministic): max relative loss difference "
          f"{first_half:.2e} (first half) / {whole:.2e} (all steps), bit-identical: {'yes' if a == b else 'no'}: "
          f"{'pass' if same else 'FAIL'} (tolerance 2%)")
    ok &= same
try:
    best = json.load(open(os.path.join(out, "swa", "best-calibrated.json")))
    predicted = best["predicted"]["iteration_time_s"]
    measured = runs["swa"]["measured"]["iteration_s"]
    print(f"\nswa after twin calibrate --scenario: predicted {predicted:.4f} s, measured {measured:.4f} s, "
          f"error {100 * (measured / predicted - 1):+.1f}%")
except (OSError, KeyError, ValueError) as error:
    print(f"\nswa after twin calibrate --scenario: FAILED: {error!r}")
    ok = False
sys.exit(0 if ok else 1)
PY
python3 - "$OUT" "$work/calibrated.json" > "$OUT/swa_ops.md" <<'PY' || status=1
import csv, json, os, sys
from collections import defaultdict
out, calibrated = sys.argv[1:3]
print("| run | layer | kind | ops | measured median ms (sum) | price ms, h200-x1 (sum) | measured / price |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for name in ("swa", "causal", "alternating", "causal-deterministic", "whole-deterministic"):
    path = os.path.join(out, name, "ops.csv")
    if not os.path.exists(path):
        continue
    sums = defaultdict(lambda: [0, 0.0, 0.0])
    for r in csv.DictReader(open(path)):
        if r["kind"].startswith("attention") and r["measured_median_ns"]:
            s = sums[(int(r["layer"]), r["kind"])]
            s[0] += 1
            s[1] += float(r["measured_median_ns"]) / 1e6
            s[2] += float(r["predicted_duration_ns"]) / 1e6
    for (layer, kind), (n, m, p) in sorted(sums.items()):
        print(f"| {name} | {layer} | {kind} | {n} | {m:.3f} | {p:.3f} | {m / p:.2f} |")
try:
    measured = json.load(open(calibrated))["gpus"][0]["measured"]
    print("\n| calibrated key (twin calibrate --scenario) | median ms |")
    print("| --- | --- |")
    for key, entry in sorted(measured.items()):
        if key.startswith("attention") and "sq=16384" in key and "kvh=8" in key:
            print(f"| {key} | {entry['median_ns'] / 1e6:.3f} |")
except (OSError, KeyError, ValueError, IndexError) as error:
    print(f"calibrated profile unread: {error!r}")
PY
cat "$OUT/summary.md" "$OUT/swa_ops.md" >> "$OUT/run.log"
log "end status $status"
exit $status
