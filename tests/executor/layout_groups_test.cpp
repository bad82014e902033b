// The groups a per-layer plan's layouts add to its strategy's: one strategy per other TP or Ulysses size (a
// Ulysses layer's whole weights reduce over the data group of TP 1), whose tensor groups are consecutive ranks of
// a stage and whose data groups stride over it; none for a plan of one layout.
#include <gtest/gtest.h>

#include "executor/layout_groups.hpp"
#include "strategies/rank_layout.hpp"
#include "tests/strategies/per_layer/per_layer_fixture.hpp"
#include "tests/strategies/strategy_fixtures.hpp"

namespace twin::exec {
namespace {

PlanGraphs per_layer_graphs(const Scenario& scenario, const std::vector<LayerStrategy>& layers) {
  const PerLayerPlan plan = testing::per_layer_plan(1, 8, 2, {static_cast<int>(layers.size())}, layers);
  PlanGraphs graphs;
  graphs.parts.push_back(per_layer_part(scenario, plan, home_strategy(scenario, plan)));
  return graphs;
}

TEST(LayoutGroups, APerLayerPlanAddsOneStrategyPerOtherGroupSize) {
  const Scenario scenario = testing::make_scenario(testing::llama_shaped(4), 1, 1024, 16);  // 8 GPUs
  const LayerStrategy tp2{{2, false}, 0, Recompute::none}, tp1{{1, false}, 1, Recompute::none};
  const LayerStrategy usp4{{4, true}, 0, Recompute::none};
  const PlanGraphs graphs = per_layer_graphs(scenario, {tp2, tp1, usp4, tp2});
  ASSERT_EQ(graphs.parts.front().strategy.tensor_model_parallel_size, 2);  // the home: the most common layer
  const std::vector<Strategy> others = other_layouts(graphs);
  ASSERT_EQ(others.size(), 2u);  // TP 1 (tp1's, and the Ulysses layer's weights), and the Ulysses group of 4
  EXPECT_EQ(others[0].tensor_model_parallel_size, 1);
  EXPECT_EQ(others[0].data_parallel_size, 8);
  EXPECT_EQ(others[1].tensor_model_parallel_size, 4);
  EXPECT_EQ(others[1].data_parallel_size, 2);
  // Rank 5: the Ulysses group of ranks 4..7 (position 1); TP 1's data group, all 8 (position 5).
  EXPECT_EQ(group_slot(others[1], GroupKind::tensor, 5)->first_rank, 4);
  EXPECT_EQ(group_slot(others[1], GroupKind::tensor, 5)->position, 1);
  EXPECT_EQ(group_slot(others[0], GroupKind::data, 5)->first_rank, 0);
  EXPECT_EQ(group_slot(others[0], GroupKind::data, 5)->position, 5);
  // One layout: nothing beyond the strategy's groups.
  EXPECT_TRUE(other_layouts(per_layer_graphs(scenario, {tp2, tp2, tp2, tp2})).empty());
  PlanGraphs uniform;
  uniform.parts.push_back(graphs.parts.front());
  uniform.parts.front().layer_units.clear();
  EXPECT_TRUE(other_layouts(uniform).empty());
}

}  // namespace
}  // namespace twin::exec
