#!/usr/bin/env bash
# Selective recompute of Megatron's `layernorm` and `mlp` modules in twin execute (executor/gpu/dense_block_recompute.cpp),
# on one GPU, from the repository root with the binaries in $1 (tests/gpu/make_carry.sh):
# scenarios/llama2-7b-4layers-bf16-1xH200.json at micro-batch 2 without recompute, with selective recompute of core
# attention alone (Megatron's default module), of layernorm and mlp, and of all three, each simulated with its shipped
# profile and run ITERS steps with --attention cudnn-deterministic. Asserted: every run's losses bit for bit the
# unrecomputed run's (a repeated forward computes the same values), and the peak each run saves against the
# unrecomputed one within SAVING_TOLERANCE of the saving the memory model predicts (its allocated peak, the part twin
# execute's peak counts). Each peak against the model's is reported, not asserted: the deterministic backward's dP
# workspace, an executor flag the model does not count (seq^2 x heads x micro-batch x about 1.8 B: 1.8 GiB here;
# docs/ACCURACY.md "The survey"), sits in every run's peak alike. Under $OUT: run.log
# (losses, peaks and their differences from the unrecomputed run, step times beside the predictions) and steps.tgz.
# Usage (device): OUT=DIR bash tests/gpu/recompute_modules_device.sh BIN
set -uo pipefail
bin="$(cd "$1" && pwd)"
OUT="${OUT:-out/recompute-modules}"
work=/tmp/recompute-modules
mkdir -p "$OUT"; rm -rf "$work"; mkdir -p "$work"
export LD_LIBRARY_PATH="$bin/lib:${LD_LIBRARY_PATH:-}" NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
date -u +"start %FT%TZ" > "$OUT/run.log"
runs="none core_attn layernorm_mlp all"
python3 - scenarios/llama2-7b-4layers-bf16-1xH200.json "$work" <<'PY'
import json, sys
base = json.load(open(sys.argv[1]))
for name, modules in (("none", None), ("core_attn", ["core_attn"]), ("layernorm_mlp", ["layernorm", "mlp"]),
                      ("all", ["core_attn", "layernorm", "mlp"])):
    s = json.loads(json.dumps(base))
    s["strategy"]["micro_batch_size"] = 2
    s["strategy"]["recompute"] = "none" if modules is None else "selective"
    if modules is not None:
        s["strategy"]["recompute_modules"] = modules
    json.dump(s, open(f"{sys.argv[2]}/{name}.json", "w"), indent=1)
PY
status=0
for name in $runs; do
  { "$bin/twin-gpu" simulate "$work/$name.json" --out "$work/$name" --quiet --top 0 &&
    "$bin/twin-gpu" execute --best --run "$work/$name" --iters "${ITERS:-12}" --warmup 3 --no-trace \
      --attention cudnn-deterministic; } > "$work/$name.log" 2>&1 || status=1
  tail -3 "$work/$name.log" >> "$OUT/run.log"
done
SAVING_TOLERANCE="${SAVING_TOLERANCE:-0.15}" python3 - "$work" $runs >> "$OUT/run.log" <<'PY' || status=1
import csv, json, os, sys
work, names = sys.argv[1], sys.argv[2:]
tolerance = float(os.environ["SAVING_TOLERANCE"])
steps = {n: list(csv.DictReader(open(f"{work}/{n}/steps.csv"))) for n in names}
metrics = {n: json.load(open(f"{work}/{n}/metrics.json")) for n in names}
ok = True
base = metrics["none"]["ranks"][0]
for n in names:
    same = sum(a["loss"] == b["loss"] for a, b in zip(steps["none"], steps[n]))
    rank = metrics[n]["ranks"][0]
    measured, predicted = rank["peak_memory_GiB"], rank["predicted_allocated_peak_GiB"]
    error = measured / predicted - 1
    print(f"{n}: {same} of {len(steps[n])} losses bit-identical to none; loss {steps[n][0]['loss']} -> "
          f"{steps[n][-1]['loss']}; peak {measured:.3f} GiB measured, {predicted:.3f} predicted ({error:+.2%}); "
          f"against none {measured - base['peak_memory_GiB']:+.3f} measured, "
          f"{predicted - base['predicted_allocated_peak_GiB']:+.3f} predicted; step {rank['median_iteration_s']:.4f} s")
    saved, predicted_saving = base["peak_memory_GiB"] - measured, base["predicted_allocated_peak_GiB"] - predicted
    ok &= same == len(steps[n]) > 0
    if predicted_saving > 0.25:  # the modules that discard tensors (core attention's flash statistics are small)
        ok &= abs(saved / predicted_saving - 1) <= tolerance
print("recompute_modules_device:", "passed" if ok else "failed")
sys.exit(0 if ok else 1)
PY
for name in $runs; do grep -h "predicted" "$work/$name/"*.md 2>/dev/null | head -2 >> "$OUT/run.log"; done
tar czf "$OUT/steps.tgz" -C "$work" $(for n in $runs; do echo "$n/steps.csv $n/metrics.json $n.log"; done) 2>/dev/null ||
  status=1
date -u +"end %FT%TZ status $status" >> "$OUT/run.log"
exit $status
