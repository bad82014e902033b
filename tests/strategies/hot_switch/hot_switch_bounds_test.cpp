// Hot switching's work is bounded before it is spent: the search's phases (every length range, every strategy,
// each simulated whole) and a plan's graph (a rank class per GPU and phase).
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "strategies/hot_switch/hot_switch_plan.hpp"
#include "strategies/hot_switch/hot_switch_search.hpp"
#include "strategies/hot_switch/hot_switch_workload.hpp"
#include "strategies/validity.hpp"
#include "hot_switch_fixture.hpp"

namespace twin {
namespace {

TEST(HotSwitchBounds, TheSearchCountsEveryPhaseItSimulates) {
  const Scenario scenario = testing::one_gpu_scenario();
  const std::vector<SeqLengthCount> batch = batch_sequences(scenario);
  Strategy s;
  s.data_parallel_size = 1;
  // Two boundaries: three length ranges ((0, 1024], (0, 4096], (1024, 4096]), each with the one strategy.
  const std::vector<std::int64_t> boundaries = candidate_boundaries(scenario, batch);
  ASSERT_EQ(boundaries.size(), 2u);
  const double one = hot_switch_search_ops(scenario, batch, boundaries, {s});
  EXPECT_GT(one, 0);
  EXPECT_DOUBLE_EQ(hot_switch_search_ops(scenario, batch, boundaries, {s, s}), 2 * one);
  EXPECT_NO_THROW(check_hot_switch_search_size(scenario, batch, boundaries, {s}));
}

TEST(HotSwitchBounds, ASearchBeyondTheBoundIsRefusedAtItsPath) {
  Scenario scenario = testing::one_gpu_scenario();
  scenario.model.num_layers = 1000;
  scenario.training.global_batch_size = 1 << 20;
  const std::vector<SeqLengthCount> batch = batch_sequences(scenario);
  const std::vector<std::int64_t> boundaries = candidate_boundaries(scenario, batch);
  const std::vector<Strategy> strategies(200, Strategy{});
  try {
    check_hot_switch_search_size(scenario, batch, boundaries, strategies);
    ADD_FAILURE() << "no InputError";
  } catch (const InputError& error) {
    EXPECT_EQ(error.json_path(), "/search/hot_switch");
    EXPECT_NE(error.expected().find("a hot-switching search that simulates at most 40 M ops, got about"),
              std::string::npos) << error.what();
  }
}

TEST(HotSwitchBounds, APlanOfSeveralPhasesCountsAClassPerGpuAndPhase) {
  Scenario scenario = testing::one_gpu_scenario();
  HotSwitchPhase phase;
  phase.strategy.num_micro_batches = 1;
  EXPECT_EQ(hot_switch_too_many_ops_reason(scenario, {phase, phase}), std::nullopt);
  phase.strategy.num_micro_batches = 1 << 20;  // alone beyond the bound: one phase is bounded as a uniform strategy
  EXPECT_EQ(hot_switch_too_many_ops_reason(scenario, {phase}), std::nullopt);
  const std::optional<std::string> reason = hot_switch_too_many_ops_reason(scenario, {phase, phase});
  ASSERT_TRUE(reason.has_value());
  EXPECT_NE(reason->find("(a class per GPU and phase: 2 phases on 1 GPUs), more than the limit of 8 M"),
            std::string::npos) << *reason;
}

}  // namespace
}  // namespace twin
