// Whole-model simulator benchmarks, the figures the issue asks for: one iteration of llama3-405b on
// 16,384 GPUs (lowering + simulation), and a search of llama2-70b on 1,024 H100s (>= 1,000 candidates).
#include <benchmark/benchmark.h>

#include <algorithm>

#include "cost/profile.hpp"
#include "core/scenario.hpp"
#include "sim/simulate.hpp"
#include "strategies/families/families.hpp"
#include "strategies/lowering.hpp"
#include "strategies/search.hpp"
#include "strategies/validity.hpp"

namespace twin {
namespace {

Scenario shipped(const char* name) { return load_scenario(std::string(TWIN_SOURCE_DIR) + "/scenarios/" + name); }

void BM_Iteration_Llama3_405B_16384Gpus(benchmark::State& state) {
  Scenario scenario = shipped("llama3-405b-16384xH100.json");
  Strategy strategy = *scenario.strategy;
  if (auto reason = complete_strategy(scenario, strategy)) state.SkipWithError(reason->c_str());
  const Profile& profile = builtin_profile();
  std::uint64_t events = 0;
  std::size_t ops = 0;
  for (auto _ : state) {
    IterationGraph graph = lower_to_op_graphs(scenario, strategy);
    IterationResult result = simulate_iteration(graph, scenario.cluster, profile);
    events += result.events;
    ops = graph.total_ops();
    benchmark::DoNotOptimize(result.iteration_ns);
  }
  state.counters["ops"] = static_cast<double>(ops);
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Iteration_Llama3_405B_16384Gpus)->Unit(benchmark::kMillisecond)->UseRealTime();

// Arguments: threads, and 1 to simulate every candidate (--exhaustive), 0 to prune by the lower bound.
void BM_Search_Llama2_70B_1024Gpus(benchmark::State& state) {
  Scenario scenario = shipped("llama2-70b-1024xH100.json");
  const Profile& profile = builtin_profile();
  SearchOptions options;
  options.jobs = static_cast<int>(state.range(0));
  options.exhaustive = state.range(1) != 0;
  std::size_t simulated = 0, enumerated = 0, pruned = 0;
  for (auto _ : state) {
    std::vector<Candidate> ranked = search(scenario, profile, plan_families(), options);
    enumerated = ranked.size();
    simulated = std::count_if(ranked.begin(), ranked.end(), [](const Candidate& c) { return c.feasible; });
    pruned = std::count_if(ranked.begin(), ranked.end(), [](const Candidate& c) { return c.pruned; });
  }
  state.counters["candidates"] = static_cast<double>(enumerated);
  state.counters["feasible"] = static_cast<double>(simulated + pruned);
  state.counters["simulated"] = static_cast<double>(simulated);
  state.counters["s/feasible"] = benchmark::Counter(static_cast<double>(simulated + pruned),
                                                    benchmark::Counter::kIsIterationInvariantRate |
                                                        benchmark::Counter::kInvert);
}
BENCHMARK(BM_Search_Llama2_70B_1024Gpus)
    ->Args({2, 0})
    ->Args({2, 1})
    ->Unit(benchmark::kSecond)
    ->UseRealTime()
    ->Iterations(1);

}  // namespace
}  // namespace twin
