#!/usr/bin/env bash
# The README's second command (and exactly what .ci/run runs): install what is missing, build
# everything, run every test (GPU tests skip with a message where no GPU is present), then fuzz the
# scenario parser for a bounded time.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh --tests
# The libraries as unity builds: a third less CPU time compiling them from scratch (docs/PERFORMANCE.md "CI's time").
cmake -S . -B build-test -DCMAKE_BUILD_TYPE=Release -DTWIN_BUILD_TESTS=ON -DTWIN_UNITY_LIBRARIES=ON > /dev/null
cmake --build build-test -j "$(nproc)"
ctest --test-dir build-test --output-on-failure -j "$(nproc)"
TWIN_BINARY=build-test/twin tools/fuzz.sh "${TWIN_FUZZ_SECONDS:-60}"  # the large run folders read by this build's twin
