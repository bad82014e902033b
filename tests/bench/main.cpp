// One main for every benchmark file in tests/bench/.
#include <benchmark/benchmark.h>

BENCHMARK_MAIN();
