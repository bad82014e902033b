#!/usr/bin/env bash
# Fuzzes twin's readers with libFuzzer under ASan and UBSan: the scenario parser (tests/fuzz/fuzz_scenario.cpp) for
# a third of the time; the family plans a scenario pins, read as their searches read them
# (tests/fuzz/fuzz_family_plans.cpp) for a third; profiles, plans, sequence-length histograms, run metrics, ops.csv,
# profiler traces, partial calibrations and Hugging Face config.json (tests/fuzz/fuzz_inputs.cpp) for the last third; then a Megatron-LM command line (twin simulate --megatron-args,
# tests/fuzz/fuzz_megatron_args.cpp) for a sixth more. Then run folders with large files: `twin report` and `twin
# calibrate --from-trace` on ops.csv files of 64 MB and 256 MB (tools/large_run_folder.py) must read them to their end
# within 8 times the file's size (plus 512 MB) of peak resident memory and never end in std::bad_alloc.
# Usage: [TWIN_BINARY=path/to/twin] tools/fuzz.sh [SECONDS]   (default 60, in all). TWIN_BINARY: a twin already
# built, for the large run folders (tools/test.sh passes its Release build's); without it the sanitized twin is built
# for them too. Fails on any crash, sanitizer report, hang, exception other than InputError, or a large run folder
# over its memory.
set -euo pipefail
seconds="${1:-60}"
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/build-fuzz"

# -O1 with line tables only, as the sanitizers' documentation suggests: stack traces name file and line, and the tree
# compiles in far less time than at -O2 with full debug information (CI builds it on two cores).
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO='-O1 -gline-tables-only -DNDEBUG' \
  -DTWIN_BUILD_FUZZ=ON -DTWIN_BUILD_TESTS=ON -DTWIN_WITH_CUDA=OFF -DTWIN_UNITY_LIBRARIES=ON \
  -DCMAKE_CXX_FLAGS='-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined' >/dev/null
twin="${TWIN_BINARY:-}"
if [ -z "$twin" ]; then
  cmake --build "$build" --target twin -j2
  twin="$build/twin"
fi
cmake --build "$build" --target fuzz_scenario fuzz_family_plans fuzz_inputs fuzz_megatron_args -j2

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
    -dict="${dict:-$root/tests/fuzz/scenario.dict}" -artifact_prefix="$build/$target-" "$corpus"
}
shopt -s nullglob
run fuzz_scenario fuzz_corpus $(( (seconds + 2) / 3 )) "$root"/scenarios/*.json "$root"/tests/fuzz/corpus/* \
  $(find "$root/tests/cli/hostile" -name "*.json" -size -20k)
run fuzz_family_plans fuzz_family_corpus $(( (seconds + 1) / 3 )) "$root"/tests/fuzz/corpus/*pinned*.json \
  "$root"/tests/fuzz/corpus/heterogeneous_pipelines.json "$root"/scenarios/*fixed-plan*.json
run fuzz_inputs fuzz_inputs_corpus $(( seconds / 3 )) "$root"/tests/fuzz/inputs/*
dict="$root/tests/fuzz/megatron.dict" run fuzz_megatron_args fuzz_megatron_corpus $(( (seconds + 5) / 6 )) \
  "$root"/tests/fuzz/megatron/* "$root"/tests/cli/hostile/megatron_args/*

# Run folders with large files: read to their end (report stops at metrics.json, which lists rank 0 only).
large="$build/large_runs"
for megabytes in 64 256; do
  run_dir="$large/ops_${megabytes}MB"
  python3 "$root/tools/large_run_folder.py" "$root/tests/traces/fixtures/executed/7b4l-mbs1-h200" "$run_dir" \
    $(( megabytes << 20 )) >/dev/null
  limit_mb=$(( 8 * megabytes + 512 ))
  for command in "report $run_dir" "calibrate --from-trace $run_dir --out $large/profile.json"; do
    set +e
    # Exit status, then the peak resident memory of the run in MB (getrusage of the finished child), then its output.
    output="$(ASAN_OPTIONS=detect_leaks=0:hard_rss_limit_mb=$limit_mb python3 -c '
import resource, subprocess, sys
run = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
print(run.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)
print(run.stdout)' "$twin" $command)"
    set -e
    read -r status peak_mb <<<"$(head -n 1 <<<"$output")"
    if [ "$status" -gt 1 ] || [ "$status" -lt 0 ] || [ "$peak_mb" -gt "$limit_mb" ] ||
       grep -q "bad_alloc\|hard rss limit\|AddressSanitizer" <<<"$output"; then
      echo "large run folder: twin $command exited $status at $peak_mb MB (limit $limit_mb): ${output:0:2000}" >&2
      exit 1
    fi
    echo "large run folder of ${megabytes} MB: twin ${command%% *} read it in $peak_mb MB (limit $limit_mb)"
  done
done
