// Search speed of the heterogeneous family: the asymmetric plans of the shipped mixed scenario
// (8 H100 + 8 A100-40GB, llama2-13b), estimated and the best 8 simulated, on one thread.
#include <benchmark/benchmark.h>

#include "core/scenario.hpp"
#include "strategies/heterogeneous/heterogeneous_search.hpp"

namespace {

void BM_HeterogeneousSearch(benchmark::State& state) {
  const twin::Scenario sc =
      twin::load_scenario(std::string(TWIN_SOURCE_DIR) + "/scenarios/mixed-h100-a100-llama2-13b.json");
  std::size_t plans = 0;
  for (auto _ : state) {
    auto candidates = twin::heterogeneous_candidates(sc, twin::builtin_profile(), 1);
    plans = candidates.size();
    benchmark::DoNotOptimize(candidates);
  }
  state.counters["simulated_plans"] = static_cast<double>(plans);
}
BENCHMARK(BM_HeterogeneousSearch)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
