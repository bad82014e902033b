// What each family states for a GPU (strategies/families/rank_plan.hpp), against values worked out by hand from
// small plans of each family: the sequences a GPU reads, its data-parallel coordinate, which parts share a layout,
// the groups of an asymmetric plan, its reductions across pipelines, and where the plan check looks.
#include <gtest/gtest.h>

#include "core/op.hpp"
#include "strategies/families/rank_plan.hpp"
#include "strategies/rank_layout.hpp"
#include "strategies/validity.hpp"
#include "tests/executor/asymmetric_fixtures.hpp"
#include "tests/strategies/per_layer/per_layer_fixture.hpp"
#include "tests/strategies/strategy_fixtures.hpp"

namespace twin {
namespace {

Scenario scenario_of(int gpus, std::int64_t global_batch) {
  Scenario scenario = testing::make_scenario(testing::llama_shaped(4), 1, 1024, global_batch);
  scenario.cluster.node_groups[0].gpus_per_node = gpus;
  return scenario;
}

// A share of whole micro-batches of `micro_batch_size` sequences, one after another from `first`.
TokenShare contiguous(std::int64_t step, std::int64_t first, int micro_batch_size, int micro_batches) {
  TokenShare share;
  share.step_sequences = step;
  share.first_sequence = first;
  share.micro_batch_stride = micro_batch_size;
  share.micro_batches = micro_batches;
  share.inputs = share.targets = {0, micro_batch_size};
  return share;
}

PlanGraphs one_part(const Scenario& scenario, const Strategy& strategy) {
  PlanGraphs lowered;
  lowered.scenario = scenario;
  PlanPart part;
  part.scenario = scenario;
  part.strategy = strategy;
  lowered.parts.push_back(part);
  return lowered;
}

// TP 1, PP 2, DP 2 on 4 GPUs (Megatron's order: data before pipeline): GPUs 1 and 3 are data-parallel rank 1 and
// read sequences 4..7 of the 8, one per micro-batch.
TEST(RankPlan, AUniformPlanGivesEachDataParallelRankItsContiguousShare) {
  const Scenario scenario = scenario_of(4, 8);
  Strategy s = testing::make_strategy(1, 2, 1, false);
  s.micro_batch_size = 1;
  ASSERT_FALSE(complete_strategy(scenario, s).has_value());
  ASSERT_EQ(s.data_parallel_size, 2);
  ASSERT_EQ(s.num_micro_batches, 4);
  const PlanGraphs lowered = one_part(scenario, s);
  for (int rank : {0, 2}) EXPECT_EQ(rank_token_share(lowered, rank, 0), contiguous(8, 0, 1, 4)) << rank;
  for (int rank : {1, 3}) EXPECT_EQ(rank_token_share(lowered, rank, 0), contiguous(8, 4, 1, 4)) << rank;
  EXPECT_EQ(data_parallel_rank(lowered, 3, 0), 1);
  EXPECT_EQ(data_parallel_rank(lowered, 2, 0), 0);
  EXPECT_EQ(layout_owners(lowered), std::vector<std::size_t>{0});
  EXPECT_FALSE(stage_groups(lowered).has_value());
  EXPECT_FALSE(replica_reduction(lowered).has_value());
  EXPECT_EQ(part_strategy_path(lowered, 0), "/strategy");
  EXPECT_EQ(predicted_memory_entry(lowered, 1, 1), 1u);  // the stage's entry
  const LayoutCheck check = layout_check(lowered);
  EXPECT_EQ(check.ranks, (std::vector<int>{0, 2}));  // each stage's first GPU
  EXPECT_EQ(check.path, "/scenario/model");
}

// CP 2 on 2 GPUs: both read the same sequences, each its context-parallel rank's chunks.
TEST(RankPlan, AContextParallelGpuReadsItsRanksChunks) {
  const Scenario scenario = scenario_of(2, 4);
  Strategy s = testing::make_strategy(1, 1, 2, false);
  s.micro_batch_size = 1;
  ASSERT_FALSE(complete_strategy(scenario, s).has_value());
  const TokenShare share = rank_token_share(one_part(scenario, s), 1, 0);
  EXPECT_EQ(share.first_sequence, 0);
  EXPECT_EQ(share.context_parallel_size, 2);
  EXPECT_EQ(share.context_parallel_rank, 1);
}

// Two phases of packed rows on 2 GPUs: DP 2 over 4 rows, then TP 2 over 2 rows. GPU 1 reads rows 2 and 3 of the
// first and, a TP peer of GPU 0, rows 0 and 1 of the second. Phases of two layouts own one each; of one, one.
TEST(RankPlan, HotSwitchingPhasesEachGiveTheirOwnLayoutsShare) {
  PlanGraphs lowered;
  lowered.scenario = scenario_of(2, 6);
  lowered.phases.resize(2);
  Strategy dp2 = testing::make_strategy(1, 1, 1, false), tp2 = testing::make_strategy(2, 1, 1, false);
  dp2.data_parallel_size = 2;
  for (Strategy* s : {&dp2, &tp2}) {
    s->micro_batch_size = 1;
    s->num_micro_batches = 2;
  }
  for (auto [strategy, rows] : {std::pair{dp2, 4}, std::pair{tp2, 2}}) {
    PlanPart& part = lowered.parts.emplace_back();
    part.scenario = lowered.scenario;
    part.scenario.training.global_batch_size = rows;
    part.strategy = strategy;
    part.packs.assign(static_cast<std::size_t>(rows), {512, 512});
  }
  EXPECT_EQ(rank_token_share(lowered, 1, 0), contiguous(4, 2, 1, 2));
  EXPECT_EQ(rank_token_share(lowered, 1, 1), contiguous(2, 0, 1, 2));
  EXPECT_EQ(data_parallel_rank(lowered, 1, 0), 1);
  EXPECT_EQ(data_parallel_rank(lowered, 1, 1), 0);
  EXPECT_EQ(layout_owners(lowered), (std::vector<std::size_t>{0, 1}));
  EXPECT_EQ(part_strategy_path(lowered, 1), "/family_plan/detail/phases/1/strategy_fields");
  lowered.parts[1].strategy = dp2;
  EXPECT_EQ(layout_owners(lowered), (std::vector<std::size_t>{0, 0}));
}

// One stage of 4 GPUs, micro-batches of 8 samples: the first layer is TP 2 (its embedding too: blocks of 2 GPUs
// on 4 samples each), the last Ulysses 4 (its output layer whole on each GPU, on the GPU's quarter of the Ulysses
// block's 8 samples: 2 samples each). GPU 3 reads the inputs of samples 4..7 and the targets of samples 6 and 7 of
// every micro-batch.
TEST(RankPlan, APerLayerGpuReadsItsEmbeddingsAndOutputLayersBlocks) {
  const Scenario scenario = scenario_of(4, 24);
  const LayerStrategy tp2{{2, false}, 0, Recompute::none}, usp4{{4, true}, 0, Recompute::none};
  const PerLayerPlan plan = testing::per_layer_plan(1, 8, 3, {4}, {tp2, tp2, tp2, usp4});
  PlanGraphs lowered;
  lowered.scenario = scenario;
  lowered.parts.push_back(per_layer_part(scenario, plan, home_strategy(scenario, plan)));
  lowered.per_layer = plan;
  TokenShare expected;
  expected.step_sequences = 24;
  expected.micro_batch_stride = 8;
  expected.micro_batches = 3;
  expected.inputs = {4, 4};
  expected.targets = {0, 8, 3, 4};
  EXPECT_EQ(rank_token_share(lowered, 3, 0), expected);
  EXPECT_EQ(expected.targets.first_row(1024), 6 * 1024);
  EXPECT_EQ(expected.targets.rows(1024), 2 * 1024);
  expected.inputs = {0, 4};
  expected.targets = {0, 8, 0, 4};
  EXPECT_EQ(rank_token_share(lowered, 0, 0), expected);
  ASSERT_EQ(lowered.parts[0].strategy.tensor_model_parallel_size, 2);  // the home: TP 2 x DP 2
  EXPECT_EQ(data_parallel_rank(lowered, 3, 0), 1);
  EXPECT_EQ(part_strategy_path(lowered, 0), "/strategy");
}

// Pipeline 0: TP 2 on GPUs 0-1 (layers 0-2), then GPU 2 (layer 3), 5 micro-batches; pipeline 1: GPU 3, every
// layer, 3 micro-batches. Pipeline 1 reads sequences 5..7, after pipeline 0's 5.
TEST(RankPlan, AnAsymmetricPlanStatesItsSharesGroupsAndReductions) {
  const PlanGraphs lowered =
      testing::asymmetric_graphs(testing::asymmetric_scenario(testing::kTp2ToTp1BesideTp1, false));
  EXPECT_EQ(rank_token_share(lowered, 3, 0), contiguous(8, 5, 1, 3));
  EXPECT_EQ(rank_token_share(lowered, 2, 0), contiguous(8, 0, 1, 5));
  EXPECT_EQ(data_parallel_rank(lowered, 3, 0), 1);
  EXPECT_EQ(data_parallel_rank(lowered, 1, 0), 0);
  const std::optional<StageGroups> groups = stage_groups(lowered);
  ASSERT_TRUE(groups.has_value());
  EXPECT_EQ(groups->tensor, (std::vector<std::vector<int>>{{0, 1}, {2}, {3}}));
  EXPECT_EQ(groups->norm, (std::vector<std::vector<int>>{{0, 1, 2}, {3}}));
  EXPECT_EQ(groups->stage_of_rank, (std::vector<int>{0, 0, 1, 0}));
  ASSERT_EQ(groups->boundaries.size(), 2u);  // stage 0 -> 1, then 1 -> 0; pipeline 1 has no boundary
  EXPECT_EQ(groups->boundaries[0].groups, (std::vector<std::vector<int>>{{0, 1, 2}}));
  EXPECT_EQ(groups->boundaries[0].senders, std::vector<int>{2});
  EXPECT_EQ(groups->boundaries[0].receivers, std::vector<int>{1});
  EXPECT_EQ(groups->boundaries[1].groups, (std::vector<std::vector<int>>{{2, 0, 1}}));
  EXPECT_EQ(groups->boundaries[1].senders, std::vector<int>{1});
  const std::optional<ReplicaReduction> replicas = replica_reduction(lowered);
  ASSERT_TRUE(replicas.has_value());
  ASSERT_EQ(replicas->segments.size(), 2u);  // cut where pipeline 0's stages are: before layer 3
  EXPECT_EQ(replicas->segments[0].units, (std::vector<std::int32_t>{kEmbeddingUnit, 0, 1, 2}));
  EXPECT_EQ(replicas->segments[0].holders, (std::vector<std::vector<int>>{{0, 1}, {3}}));
  EXPECT_EQ(replicas->segments[1].units, (std::vector<std::int32_t>{3, kHeadUnit}));
  EXPECT_EQ(replicas->segments[1].holders, (std::vector<std::vector<int>>{{2}, {3}}));
  EXPECT_FALSE(replicas->optimizer_sharded);
  EXPECT_EQ(part_strategy_path(lowered, 0), "");
  EXPECT_EQ(predicted_memory_entry(lowered, 2, 0), 2u);  // pipeline 1's stage: the third of the plan's stages
  EXPECT_EQ(layout_check(lowered).ranks, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(layout_check(lowered).path, "/family_plan/detail/pipelines");
  // ZeRO-1: the optimizer state over both pipelines, the gradient norm over every GPU at once.
  const PlanGraphs sharded =
      testing::asymmetric_graphs(testing::asymmetric_scenario(testing::kTp2ToTp1BesideTp1, false, 1));
  EXPECT_TRUE(replica_reduction(sharded)->optimizer_sharded);
  EXPECT_EQ(stage_groups(sharded)->norm, (std::vector<std::vector<int>>{{0, 1, 2, 3}}));
}

}  // namespace
}  // namespace twin
