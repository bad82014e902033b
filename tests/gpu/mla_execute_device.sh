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
sums = defaultdict(lambda: [0, 0.0, 0.0])
for r in rows:
    if not block(r):
        continue
    s = sums[(r["role"], r["kind"], r["phase"])]
    s[0] += 1
    s[1] += float(r["predicted_duration_ns"]) / 1e6
    s[2] += float(r["measured_median_ns"]) / 1e6
print("| role | kind | phase | ops | predicted ms | measured ms | measured / predicted |")
print("| --- | --- | --- | --- | --- | --- | --- |")
total = [0, 0.0, 0.0]
for (role, kind, phase), (n, p, m) in sorted(sums.items(), key=lambda kv: -kv[1][2]):
    print(f"| {role} | {kind} | {phase} | {n} | {p:.3f} | {m:.3f} | {m / p if p else float('nan'):.2f} |")
    total = [total[0] + n, total[1] + p, total[2] + m]
print(f"| all | | | {total[0]} | {total[1]:.3f} | {total[2]:.3f} | {total[2] / total[1]:.2f} |")
PY
cat "$OUT/mla_ops.md" >> "$OUT/run.log"
exit $status
