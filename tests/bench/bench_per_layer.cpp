// Search speed of the per-layer family: pricing of every layer strategy in the engine, the DP per stage
// and micro-batch, lowering and simulation of each chosen plan, on the shipped tight-budget scenario.
#include <benchmark/benchmark.h>

#include "core/scenario.hpp"
#include "strategies/per_layer/per_layer_search.hpp"

namespace twin {
namespace {

void BM_PerLayerSearch_Llama13b_8xA100_40GB(benchmark::State& state) {
  const Scenario s = load_scenario(std::string(TWIN_SOURCE_DIR) + "/scenarios/llama2-13b-8xA100-40GB-per-layer.json");
  std::size_t plans = 0;
  for (auto _ : state) plans = per_layer_candidates(s, builtin_profile()).size();
  state.counters["plans"] = static_cast<double>(plans);
}
BENCHMARK(BM_PerLayerSearch_Llama13b_8xA100_40GB)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace twin
