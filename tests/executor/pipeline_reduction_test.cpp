// An asymmetric plan's gradient reduction across pipelines, planned without a GPU: every element of every GPU's
// gradients lies in exactly one piece, each piece's holders are every pipeline's, the scales count a replicated
// weight once per pipeline, and each GPU moves the gradient bytes the simulator prices for its stage.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "executor/explicit_groups.hpp"
#include "executor/parameters.hpp"
#include "executor/pipeline_reduction.hpp"
#include "strategies/heterogeneous/asymmetric_plan.hpp"
#include "tests/executor/asymmetric_fixtures.hpp"

namespace twin::exec {
namespace {

using testing::asymmetric_graphs;
using testing::asymmetric_scenario;

struct Case {
  const char* pipelines;
  bool sequence_parallel;
  int vocabulary = 8192;
};

class PipelineReductionPlan : public ::testing::TestWithParam<Case> {};

TEST_P(PipelineReductionPlan, CoversEveryGradientOnceWithEveryPipelinesCopy) {
  const Scenario scenario =
      asymmetric_scenario(GetParam().pipelines, GetParam().sequence_parallel, 0, GetParam().vocabulary);
  const PlanGraphs lowered = asymmetric_graphs(scenario);
  const std::vector<PipelineReduction> reductions = plan_pipeline_reduction(lowered);
  ASSERT_FALSE(reductions.empty());
  std::int64_t held_by_one_pipeline = 0;  // vocabulary padding only one pipeline's TP size pads to
  // Per rank and unit: how many pieces cover each element of its tensors (padding aside).
  std::map<std::pair<int, std::int32_t>, std::vector<int>> covered;
  std::map<int, std::vector<ParameterUnitLayout>> units;
  for (int rank = 0; rank < lowered.world_size(); ++rank) {
    units[rank] = plan_parameter_units(asymmetric_rank_part(lowered, rank), rank, 0);
    for (const ParameterUnitLayout& unit : units[rank]) covered[{rank, unit.id}].assign(unit.padded, 0);
  }
  std::map<int, std::int64_t> moved;  // elements per rank
  for (const PipelineReduction& r : reductions) {
    ASSERT_TRUE(std::is_sorted(r.ranks.begin(), r.ranks.end()));
    ASSERT_EQ(r.pieces.size(), r.ranks.size());
    std::set<int> pipelines;
    for (int rank : r.ranks) pipelines.insert(lowered.graph.classes.at(lowered.parts.front().class_of_rank[rank]).pipeline);
    if (pipelines.size() == 1) held_by_one_pipeline += r.elements * static_cast<std::int64_t>(r.ranks.size());
    else EXPECT_EQ(pipelines.size(), 2u) << "a reduction holds every pipeline's copy";
    for (std::size_t h = 0; h < r.ranks.size(); ++h) {
      std::int64_t elements = 0;
      for (const ReductionPiece& piece : r.pieces[h]) {
        elements += piece.elements();
        std::vector<int>& marks = covered.at({r.ranks[h], piece.unit});
        for (std::int64_t row = 0; row < piece.rows; ++row)
          for (std::int64_t col = 0; col < piece.cols; ++col) ++marks.at(piece.first + row * piece.ld + col);
      }
      EXPECT_EQ(elements, r.elements);
      moved[r.ranks[h]] += elements;
      // Sharded pieces: one holder per pipeline, scale 1. Replicated: a non-SP TP-2 stage's two copies count half.
      const auto same_pipeline = std::count_if(r.ranks.begin(), r.ranks.end(), [&](int other) {
        return lowered.graph.classes.at(lowered.parts.front().class_of_rank[other]).pipeline ==
               lowered.graph.classes.at(lowered.parts.front().class_of_rank[r.ranks[h]]).pipeline;
      });
      const bool sp = asymmetric_rank_part(lowered, r.ranks[h]).strategy.sequence_parallel;
      EXPECT_DOUBLE_EQ(r.scale[h], sp ? 1.0 : 1.0 / static_cast<double>(same_pipeline));
    }
  }
  for (const auto& [rank, unit_list] : units)
    for (const ParameterUnitLayout& unit : unit_list)
      for (const WeightTensor& w : unit.tensors)
        for (std::int64_t i = w.offset; i < w.offset + w.elements(); ++i)
          ASSERT_EQ(covered.at({rank, unit.id})[i], 1) << "rank " << rank << " " << w.name << " element " << i - w.offset;
  // Vocabulary 8000 under TP 2 and TP 1: 128 rows of the table and 128 columns of the output layer, 1024 wide,
  // held by pipeline 0 alone (its two GPUs' halves).
  EXPECT_EQ(held_by_one_pipeline, GetParam().vocabulary == 8000 ? 2 * 128 * 1024 : 0);
  // The bytes the simulator's ring moves per GPU (segment_gradient_bytes): 2 per element of the stage's shard.
  const AsymmetricPlanDetail& plan = *lowered.asymmetric;
  std::map<int, Bytes> priced;
  for (const GradientSegment& segment : gradient_segments(scenario.model, plan.pipelines))
    for (std::size_t p = 0; p < plan.pipelines.size(); ++p) {
      const AsymmetricStage& stage = plan.pipelines[p].stages[segment.stage_of_pipeline[p]];
      for (int rank : stage.devices)
        priced[rank] += segment_gradient_bytes(scenario.model, segment, stage.tensor_model_parallel_size,
                                               plan.pipelines[p].stages.size() == 1);
    }
  for (const auto& [rank, bytes] : priced) EXPECT_EQ(2 * moved[rank], bytes) << "rank " << rank;
}

INSTANTIATE_TEST_SUITE_P(Plans, PipelineReductionPlan,
                         ::testing::Values(Case{testing::kTp2BesidePp2, true}, Case{testing::kTp2BesidePp2, false},
                                           Case{testing::kTp2ToTp1BesideTp1, true},
                                           Case{testing::kTp2BesidePp2, true, 8000}));

TEST(PipelineReductionPlan, RoundsHoldDisjointSetsEachOnce) {
  const PlanGraphs lowered = asymmetric_graphs(asymmetric_scenario(testing::kTp2BesidePp2, true));
  const std::vector<PipelineReduction> reductions = plan_pipeline_reduction(lowered);
  std::set<std::vector<int>> sets, seen;
  for (const PipelineReduction& r : reductions) sets.insert(r.ranks);
  for (const auto& round : reduction_group_rounds(reductions)) {
    std::set<int> used;
    for (const std::vector<int>& set : round) {
      EXPECT_TRUE(seen.insert(set).second);
      for (int rank : set) EXPECT_TRUE(used.insert(rank).second) << "rank " << rank << " twice in one round";
    }
  }
  EXPECT_EQ(seen, sets);
}

TEST(ExplicitGroups, SplitStagesPipelinesAndBoundaries) {
  const PlanGraphs lowered = asymmetric_graphs(asymmetric_scenario(testing::kTp2ToTp1BesideTp1, true));
  const ExplicitGroups groups = explicit_groups(lowered, plan_pipeline_reduction(lowered));
  EXPECT_EQ(groups.tensor, (std::vector<std::vector<int>>{{0, 1}, {2}, {3}}));
  EXPECT_EQ(groups.pipeline, (std::vector<std::vector<int>>{{0, 1, 2}, {3}}));
  EXPECT_EQ(groups.stage_of_rank, (std::vector<int>{0, 0, 1, 0}));
  ASSERT_EQ(groups.boundaries.size(), 2u);  // stage 0 -> 1 and back, in pipeline 0 only
  EXPECT_EQ(groups.boundaries[0].from_stage, 0);
  EXPECT_EQ(groups.boundaries[0].groups, (std::vector<std::vector<int>>{{0, 1, 2}}));
  EXPECT_EQ(groups.boundaries[0].sides[0].senders, 2);
  EXPECT_TRUE(groups.boundaries[0].sides[0].senders_sharded);   // TP 2 under SP
  EXPECT_FALSE(groups.boundaries[0].sides[0].receivers_sharded);  // TP 1 holds every row
  EXPECT_EQ(groups.boundaries[1].from_stage, 1);
  EXPECT_EQ(groups.boundaries[1].groups, (std::vector<std::vector<int>>{{2, 0, 1}}));
  // ZeRO-1: each GPU's parts hold every pipeline's elements, so the gradient norm sums over all GPUs.
  const PlanGraphs sharded = asymmetric_graphs(asymmetric_scenario(testing::kTp2ToTp1BesideTp1, true, 1));
  EXPECT_EQ(explicit_groups(sharded, plan_pipeline_reduction(sharded)).pipeline,
            (std::vector<std::vector<int>>{{0, 1, 2, 3}}));
}

TEST(AsymmetricRankPart, LaysOutItsStageAsAUniformPipeline) {
  const PlanGraphs lowered = asymmetric_graphs(asymmetric_scenario(testing::kTp2ToTp1BesideTp1, true));
  EXPECT_EQ(lowered.family(), "heterogeneous");
  EXPECT_EQ(lowered.world_size(), 4);
  EXPECT_EQ(lowered.parts.front().class_of_rank, (std::vector<int>{0, 0, 1, 2}));
  const PlanPart second = asymmetric_rank_part(lowered, 1);
  EXPECT_EQ(second.strategy.tensor_model_parallel_size, 2);
  EXPECT_EQ(second.strategy.pipeline_model_parallel_size, 2);
  EXPECT_EQ(second.strategy.data_parallel_size, 1);
  EXPECT_EQ(second.strategy.num_micro_batches, 5);
  EXPECT_EQ(second.scenario.training.global_batch_size, 5);
  EXPECT_EQ(second.stage_layers, (std::vector<int>{3, 1}));
  EXPECT_EQ(second.layout_rank(1), 1);
  EXPECT_EQ(asymmetric_rank_part(lowered, 2).layout_rank(2), 1);  // stage 1 of TP 1: layout rank 1 * 1 + 0
  EXPECT_THROW(second.layout_rank(3), std::logic_error);
  // Its units: the embedding and layers 0-2 on stage 0; layer 3 and the output layer on stage 1.
  std::vector<std::int32_t> ids;
  for (const ParameterUnitLayout& unit : plan_parameter_units(second, 1, 0)) ids.push_back(unit.id);
  EXPECT_EQ(ids, (std::vector<std::int32_t>{kEmbeddingUnit, 0, 1, 2}));
  ids.clear();
  for (const ParameterUnitLayout& unit : plan_parameter_units(asymmetric_rank_part(lowered, 2), 2, 0))
    ids.push_back(unit.id);
  EXPECT_EQ(ids, (std::vector<std::int32_t>{3, kHeadUnit}));
}

// twin execute runs a GPU per rank: a plan that leaves a GPU of the numbering out is refused, naming it.
TEST(AsymmetricRankPart, StagesMustNumberTheirGpusFromZeroOn) {
  const char* gap = R"([
    { "micro_batch_size": 1, "num_micro_batches": 4,
      "stages": [ { "devices": [0, 1], "tensor_model_parallel_size": 2, "num_layers": 4 } ] },
    { "micro_batch_size": 1, "num_micro_batches": 4,
      "stages": [ { "devices": [3], "tensor_model_parallel_size": 1, "num_layers": 4 } ] } ])";
  try {
    asymmetric_graphs(asymmetric_scenario(gap, true));
    FAIL() << "a plan over GPUs 0, 1 and 3 was accepted";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("pipeline 1 uses GPU 3"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace twin::exec
