// The deepest pipelines of the published-results table (docs/VALIDATION.md), one candidate each, lowered and
// simulated: Korthikanti et al.'s 530B (TP 8, PP 35, interleaved with 3 chunks, 280 micro-batches) and
// Narayanan et al.'s 1T (TP 8, PP 64, interleaved with 2 chunks, DP 6, 512 micro-batches per pipeline); and the
// 1T of Korthikanti et al. under 1F1B (PP 64, 512 micro-batches). Argument 0: the whole iteration replayed (what
// best.json and the traces need); 1: as a search simulates a candidate, its steady state extrapolated from two
// shorter replays (strategies/steady_state.hpp). Run one benchmark per process for its peak memory.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include "cost/profile.hpp"
#include "sim/simulate.hpp"
#include "strategies/lowering.hpp"
#include "strategies/search.hpp"
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
  const Replay replay = state.range(0) == 0 ? Replay::whole : Replay::steady_state;
  const Scenario& scenario = row(id).scenario;
  Strategy strategy;
  strategy.tensor_model_parallel_size = scenario.search.tensor_model_parallel_size.front();
  strategy.pipeline_model_parallel_size = scenario.search.pipeline_model_parallel_size.front();
  strategy.virtual_pipeline_model_parallel_size = chunks;
  strategy.sequence_parallel = scenario.search.sequence_parallel.front();
  strategy.micro_batch_size = scenario.search.micro_batch_size.front();
  strategy.recompute = scenario.search.recompute.front();
  strategy.schedule = chunks > 1 ? Schedule::interleaved_1f1b : Schedule::one_f_one_b;
  if (auto reason = complete_strategy(scenario, strategy)) {
    state.SkipWithError(reason->c_str());
    return;
  }
  const Profile& profile = builtin_profile();
  std::uint64_t events = 0;
  for (auto _ : state) {
    const Candidate candidate = evaluate(scenario, profile, strategy, false, nullptr, nullptr, replay);
    events = candidate.result.events;
    benchmark::DoNotOptimize(candidate.result.iteration_ns);
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  state.counters["events"] = static_cast<double>(events);
  state.counters["peak_RSS_GiB"] = static_cast<double>(usage.ru_maxrss) / (1024.0 * 1024.0);
}

void BM_Validation_530B_PP35_Interleaved(benchmark::State& state) {
  simulate_row(state, "korthikanti22_530B_selective_plus_sp", 3);
}
BENCHMARK(BM_Validation_530B_PP35_Interleaved)->Arg(0)->Arg(1)->Unit(benchmark::kSecond)->UseRealTime();

void BM_Validation_1T_PP64_Interleaved(benchmark::State& state) {
  simulate_row(state, "narayanan21_t1_1008.0B", 2);
}
BENCHMARK(BM_Validation_1T_PP64_Interleaved)->Arg(0)->Arg(1)->Unit(benchmark::kSecond)->UseRealTime();

void BM_Validation_1T_PP64_1F1B(benchmark::State& state) { simulate_row(state, "korthikanti22_1T_full_recompute", 1); }
BENCHMARK(BM_Validation_1T_PP64_1F1B)->Arg(0)->Arg(1)->Unit(benchmark::kSecond)->UseRealTime();

}  // namespace
}  // namespace twin
