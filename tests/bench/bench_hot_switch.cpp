// Hot switching's search speed: the family's whole search on the shipped 8-GPU long-tailed scenario (every
// bucket x strategy phase simulated, the switches simulated, the best plans and static baselines simulated
// whole), and one switch planned and simulated alone.
#include <benchmark/benchmark.h>

#include "cost/profile.hpp"
#include "core/scenario.hpp"
#include "sim/simulate.hpp"
#include "strategies/hot_switch/hot_switch_graph.hpp"
#include "strategies/hot_switch/hot_switch_search.hpp"

namespace twin {
namespace {

Scenario hot_switch_scenario() {
  return load_scenario(std::string(TWIN_SOURCE_DIR) + "/scenarios/llama2-7b-8xH100-hot-switch.json");
}

void BM_HotSwitchSearch_Llama2_7B_8Gpus(benchmark::State& state) {
  const Scenario scenario = hot_switch_scenario();
  std::size_t candidates = 0;
  for (auto _ : state) {
    const std::vector<Candidate> found = search_hot_switch(scenario, builtin_profile(), static_cast<int>(state.range(0)));
    candidates = found.size();
    benchmark::DoNotOptimize(found.data());
  }
  state.counters["candidates"] = static_cast<double>(candidates);
}
BENCHMARK(BM_HotSwitchSearch_Llama2_7B_8Gpus)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);

void BM_SwitchPlanAndSimulate_Dp8ToTp4(benchmark::State& state) {
  const Scenario scenario = hot_switch_scenario();
  Strategy from, to;
  from.data_parallel_size = 8;
  from.zero_stage = 1;
  to.tensor_model_parallel_size = 4;
  to.data_parallel_size = 2;
  to.sequence_parallel = true;
  to.zero_stage = 1;
  std::size_t transfers = 0;
  for (auto _ : state) {
    const SwitchPlan plan = plan_switch(scenario.model, scenario.cluster, from, to, true);
    const IterationResult r =
        simulate_iteration(switch_only_graph(scenario, plan, to), scenario.cluster, builtin_profile());
    transfers = plan.transfers.size();
    benchmark::DoNotOptimize(r.iteration_ns);
  }
  state.counters["transfers"] = static_cast<double>(transfers);
}
BENCHMARK(BM_SwitchPlanAndSimulate_Dp8ToTp4)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace twin
