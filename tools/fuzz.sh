#!/usr/bin/env bash
# Fuzzes the scenario parser (tests/fuzz/fuzz_scenario.cpp) with libFuzzer under ASan and UBSan.
# Usage: tools/fuzz.sh [SECONDS]   (default 60). Fails on any crash, sanitizer report or non-InputError.
set -euo pipefail
seconds="${1:-60}"
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/build-fuzz"

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DTWIN_BUILD_FUZZ=ON -DTWIN_BUILD_TESTS=ON -DTWIN_WITH_CUDA=OFF \
  -DCMAKE_CXX_FLAGS='-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined' >/dev/null
cmake --build "$build" --target fuzz_scenario -j2

# The fuzzer grows its corpus in the build folder; the seeds in the repository stay as they are.
corpus="$build/fuzz_corpus"
mkdir -p "$corpus"
shopt -s nullglob
for seed in "$root"/scenarios/*.json "$root"/tests/fuzz/corpus/*; do cp "$seed" "$corpus/"; done

fuzzer="$(find "$build" -type f -name fuzz_scenario -perm -u+x | head -n 1)"
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ASAN_OPTIONS=detect_leaks=1 \
  "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -dict="$root/tests/fuzz/scenario.dict" -artifact_prefix="$build/" "$corpus"
