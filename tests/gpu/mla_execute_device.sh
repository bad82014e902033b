#!/usr/bin/env bash
# The device call of issue 40 item 4's multi-latent attention in twin execute, from the repository root with the
# binaries in $1 (twin-gpu, test_gpu and lib/ as tests/gpu/make_carry.sh packs them): MLA's GPU tests against float64
# (test_gpu '*Mla*'), then scenarios/exec-deepseek-v3-mla-small-1xH200.json simulated with its shipped
# profile and its best plan run ITERS steps (default 40, 3 warm-up), through tests/gpu/moe_shapes_device.sh; then
# mla_ops.md: the MLA layers' block ops (the mla_* roles, RoPE and attention), their CUPTI-measured median time beside
# their price, summed per iteration over micro-batches and layers, by role, kind and phase.
# Usage (device): OUT=DIR bash tests/gpu/mla_execute_device.sh BIN
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
OUT="${OUT:-out/mla-execute}"
export OUT
scenario=scenarios/exec-deepseek-v3-mla-small-1xH200.json
TESTS="${TESTS:-*Mla*}" bash "$here/moe_shapes_device.sh" "$1" "$scenario"
status=$?
python3 - "$OUT/$(basename "$scenario" .json)/ops.csv" > "$OUT/mla_ops.md" <<'PY' || status=1
import csv, sys
from collections import defaultdict
rows = list(csv.DictReader(open(sys.argv[1])))
block = lambda r: int(r["layer"]) >= 0 and (r["role"].startswith("mla_") or r["kind"].startswith(("rope", "attention")))
# (ops, unmeasured ops, predicted ms, measured ms): an op without kernels (the latent's copy is a cudaMemcpy2D, which
# CUPTI's kernel records do not hold) has an empty measured time.
sums = defaultdict(lambda: [0, 0, 0.0, 0.0])
for r in rows:
    if not block(r):
        continue
    s = sums[(r["role"], r["kind"], r["phase"])]
    s[0] += 1
    s[1] += r["measured_median_ns"] == ""
    s[2] += float(r["predicted_duration_ns"]) / 1e6
    s[3] += float(r["measured_median_ns"] or 0) / 1e6
print("| role | kind | phase | ops | unmeasured | predicted ms | measured ms | measured / predicted |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
total = [0, 0, 0.0, 0.0]
for (role, kind, phase), (n, u, p, m) in sorted(sums.items(), key=lambda kv: -kv[1][3]):
    ratio = f"{m / p:.2f}" if p and u < n else "-"
    print(f"| {role} | {kind} | {phase} | {n} | {u} | {p:.3f} | {m:.3f} | {ratio} |")
    total = [total[0] + n, total[1] + u, total[2] + p, total[3] + m]
print(f"| all | | | {total[0]} | {total[1]} | {total[2]:.3f} | {total[3]:.3f} | {total[3] / total[2]:.2f} |")
PY
cat "$OUT/mla_ops.md" >> "$OUT/run.log"
exit $status
