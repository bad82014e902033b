#!/usr/bin/env bash
# Issue 40: the all-to-all as expert parallelism's dispatch sends it, in blocks per peer, measured into a profile on
# a lent machine of two or more GPUs (`twin calibrate --collectives`: the tables the profile lacks are added, every
# other entry as it was), and the row exchange's GPU test (tests/gpu/row_exchange_test.cpp).
# $OUT: the profile with the tables added, calibrate-collectives.log, row_exchange_test.log.
# Usage (device): bash tests/gpu/a2a_blocks_device.sh BIN_DIR PROFILE_JSON
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="$1"; profile="$2"
OUT="${OUT:-out/a2a-blocks}"
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
"$bin/twin" calibrate --collectives --profile "$profile" --out "$OUT/$(basename "$profile")" 2>&1 |
  tee "$OUT/calibrate-collectives.log" | grep -E "all_to_all|wrote|error" || true
test -s "$OUT/$(basename "$profile")"
if [ -x "$bin/test_gpu" ]; then
  "$bin/test_gpu" --gtest_filter='RowExchange*' > "$OUT/row_exchange_test.log" 2>&1 && echo "row exchange test: passed" ||
    { echo "row exchange test: FAILED"; tail -20 "$OUT/row_exchange_test.log"; exit 1; }
fi
