#!/usr/bin/env bash
# Fuzzes twin's readers with libFuzzer under ASan and UBSan: the scenario parser (tests/fuzz/fuzz_scenario.cpp)
# for half the time, profiles, plans, sequence-length histograms, run metrics and ops.csv (tests/fuzz/fuzz_inputs.cpp)
# for the other half. Usage: tools/fuzz.sh [SECONDS]   (default 60, in all). Fails on any crash, sanitizer
# report, hang or exception other than InputError.
set -euo pipefail
seconds="${1:-60}"
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/build-fuzz"

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DTWIN_BUILD_FUZZ=ON -DTWIN_BUILD_TESTS=ON -DTWIN_WITH_CUDA=OFF \
  -DCMAKE_CXX_FLAGS='-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined' >/dev/null
cmake --build "$build" --target fuzz_scenario fuzz_inputs -j2

# Each fuzzer grows its corpus in the build folder; the seeds in the repository stay as they are.
run() {  # run TARGET CORPUS_NAME SECONDS SEEDS...
  local target="$1" corpus="$build/$2" time="$3"
  shift 3
  mkdir -p "$corpus"
  for seed in "$@"; do cp "$seed" "$corpus/"; done
  local fuzzer
  fuzzer="$(find "$build" -type f -name "$target" -perm -u+x | head -n 1)"
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ASAN_OPTIONS=detect_leaks=1 \
    "$fuzzer" -max_total_time="$time" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -dict="$root/tests/fuzz/scenario.dict" -artifact_prefix="$build/$target-" "$corpus"
}
shopt -s nullglob
run fuzz_scenario fuzz_corpus $(( (seconds + 1) / 2 )) "$root"/scenarios/*.json "$root"/tests/fuzz/corpus/* \
  $(find "$root/tests/cli/hostile" -name "*.json" -size -20k)
run fuzz_inputs fuzz_inputs_corpus $(( seconds / 2 )) "$root"/tests/fuzz/inputs/*
