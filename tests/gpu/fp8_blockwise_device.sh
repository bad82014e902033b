#!/usr/bin/env bash
# The device call of the block-wise recipe's execution (issue 41): tests/gpu/fp8_recipes_check.sh with the FP8 GPU
# tests and, against BF16, the recipes asked (default: delayed, the per-tensor reference, and blockwise); its
# summary as OUT/summary.md, its log as OUT/run.log, its folder as OUT/recipes.tar.gz, and the casts the call
# calibrated (tests/gpu/fp8_cast_times.py) as OUT/casts.txt, beside the block-wise casts of the call before the
# cast's 4-byte stores (docs/accuracy/2026-11-29-fp8-blockwise-1xH200.tar.gz).
# Usage (device, repository root): OUT=DIR bash tests/gpu/fp8_blockwise_device.sh BIN [RECIPE...]
set -uo pipefail
bin=$(cd "$1" && pwd); shift
recipes=("$@"); [ ${#recipes[@]} -gt 0 ] || recipes=(delayed blockwise)
repo=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-out/fp8bl}; mkdir -p "$OUT"
work=$(mktemp -d)
GTEST_FILTER='*Fp8*:KernelCalibration.MeasuresEveryKind*' timeout "${LIMIT_S:-330}" \
  bash "$repo/tests/gpu/fp8_recipes_check.sh" "$bin" "$work/r" "${ITERS:-60}" "${recipes[@]}" > "$OUT/run.log" 2>&1
status=$?
echo "recipes check: exit $status" >> "$OUT/run.log"
cp "$work/r/summary.md" "$OUT/" 2>/dev/null
tar -C "$work" -xzf "$repo/docs/accuracy/2026-11-29-fp8-blockwise-1xH200.tar.gz" r/h200-fp8.json --transform 's,^r,before,'
python3 "$repo/tests/gpu/fp8_cast_times.py" "$work/r/h200-fp8.json" "$work/before/h200-fp8.json" > "$OUT/casts.txt" 2>&1
tar -C "$work" -czf "$OUT/recipes.tar.gz" r
exit $status
