// One main for every benchmark file in tests/bench/: the allocator set as twin's own main sets it.
#include <benchmark/benchmark.h>

#include "core/allocator.hpp"

int main(int argc, char** argv) {
  twin::keep_freed_memory_for_reuse();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
