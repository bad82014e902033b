// The deepest pipelines of the published-results table (docs/VALIDATION.md), one candidate each, lowered and
// simulated: Korthikanti et al.'s 530B (TP 8, PP 35, interleaved with 3 chunks, 280 micro-batches) and
// Narayanan et al.'s 1T (TP 8, PP 64, interleaved with 2 chunks, DP 6, 512 micro-batches per pipeline).
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include "cost/profile.hpp"
#include "sim/simulate.hpp"
#include "strategies/lowering.hpp"
#include "strategies/validity.hpp"
#include "validation/published_table.hpp"

namespace twin {
namespace {

const PublishedRow& row(const std::string& id) {
  static const PublishedTable table =
      load_published_table(std::string(TWIN_SOURCE_DIR) + "/tests/validation/published.json");
  for (const PublishedRow& r : table.rows)
    if (r.id == id) return r;
  throw std::invalid_argument("no row " + id);
}

// The row's search space pinned to one strategy: the first micro-batch size and the interleaved schedule.
void simulate_row(benchmark::State& state, const std::string& id, int chunks) {
  const Scenario& scenario = row(id).scenario;
  Strategy strategy;
  strategy.tensor_model_parallel_size = scenario.search.tensor_model_parallel_size.front();
  strategy.pipeline_model_parallel_size = scenario.search.pipeline_model_parallel_size.front();
  strategy.virtual_pipeline_model_parallel_size = chunks;
  strategy.sequence_parallel = scenario.search.sequence_parallel.front();
  strategy.micro_batch_size = scenario.search.micro_batch_size.front();
  strategy.recompute = scenario.search.recompute.front();
  strategy.schedule = Schedule::interleaved_1f1b;
  if (auto reason = complete_strategy(scenario, strategy)) {
    state.SkipWithError(reason->c_str());
    return;
  }
  const Profile& profile = builtin_profile();
  std::size_t ops = 0;
  for (auto _ : state) {
    IterationGraph graph = lower_to_op_graphs(scenario, strategy);
    IterationResult result = simulate_iteration(graph, scenario.cluster, profile);
    ops = graph.total_ops();
    benchmark::DoNotOptimize(result.iteration_ns);
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  state.counters["ops"] = static_cast<double>(ops);
  state.counters["peak_RSS_GiB"] = static_cast<double>(usage.ru_maxrss) / (1024.0 * 1024.0);
}

void BM_Validation_530B_PP35_Interleaved(benchmark::State& state) {
  simulate_row(state, "korthikanti22_530B_selective_plus_sp", 3);
}
BENCHMARK(BM_Validation_530B_PP35_Interleaved)->Unit(benchmark::kSecond)->UseRealTime();

void BM_Validation_1T_PP64_Interleaved(benchmark::State& state) {
  simulate_row(state, "narayanan21_t1_1008.0B", 2);
}
BENCHMARK(BM_Validation_1T_PP64_Interleaved)->Unit(benchmark::kSecond)->UseRealTime();

}  // namespace
}  // namespace twin
