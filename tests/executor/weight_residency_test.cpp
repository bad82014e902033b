// When a rank holds a ZeRO-sharded unit's weights and gradients whole (executor/weight_residency.hpp), checked on
// real lowerings without a GPU: replaying the windows op by op, every weight an op reads and every gradient it writes
// of such a unit is held whole at that op, every buffer made is freed once, and the units ZeRO-1 keeps whole have none.
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <utility>

#include <gtest/gtest.h>

#include "executor/op_binding.hpp"
#include "executor/parameters.hpp"
#include "executor/weight_residency.hpp"
#include "strategies/lowering.hpp"
#include "strategies/validity.hpp"
#include "tests/executor/plan_check_fixture.hpp"
#include "../strategies/strategy_fixtures.hpp"

namespace twin::exec {
namespace {

struct ResidencyPlan {
  int tp = 1, pp = 1, dp = 2, zero = 3;
  bool tied = false;
  Recompute recompute = Recompute::none;
  int ep = 0;  // > 0: the MoE model at this expert-parallel size
};

struct LoweredResidency {
  Scenario scenario;
  Strategy strategy;
  IterationGraph graph;
};

LoweredResidency residency_lowering(const ResidencyPlan& plan) {
  ModelConfig model = plan.ep > 0 ? testing::moe_shaped() : testing::llama_shaped(4);
  model.untie_embeddings_and_output_weights = !plan.tied;
  LoweredResidency out{testing::make_scenario(model, 1, 1024, 16), testing::make_strategy(plan.tp, plan.pp), {}};
  out.scenario.cluster.node_groups[0].gpus_per_node = plan.tp * plan.pp * plan.dp;
  out.strategy.data_parallel_size = plan.dp;
  out.strategy.zero_stage = plan.zero;
  out.strategy.recompute = plan.recompute;
  out.strategy.expert_model_parallel_size = std::max(plan.ep, 1);
  if (auto reason = complete_strategy(out.scenario, out.strategy)) throw std::runtime_error(*reason);
  out.graph = lower_to_op_graphs(out.scenario, out.strategy);
  return out;
}

ShardedUnits sharded_units_of(const std::vector<ParameterUnitLayout>& units) {
  ShardedUnits sharded;
  for (const ParameterUnitLayout& unit : units) sharded.add(unit);
  return sharded;
}

struct Replay {
  int weight_windows = 0, gradient_windows = 0, reductions = 0, most_weights_held = 0;
};

// Walks the class's ops with the windows' buffers: each used whole where it is held, each made once and freed once.
Replay replay_residency(const RankClass& rc, const std::vector<OpBinding>& bindings, const ShardedUnits& units,
                        const StageWeights& stage, const WeightResidency& residency) {
  Replay replay;
  std::set<std::pair<Residency, std::int32_t>> held;
  for (OpIndex i = 0; i < rc.size(); ++i) {
    const std::string op = op_id(rc.index, i) + " " + op_name(rc.op(i));
    for (const ResidencyChange& made : residency.at(i).acquire) {
      EXPECT_TRUE(held.insert({made.buffer, made.unit}).second) << op << ": made twice";
      (made.buffer == Residency::weights ? replay.weight_windows : replay.gradient_windows) += 1;
    }
    const ParameterAccess access = parameter_access(rc.op(i), bindings[i], stage);
    for (std::int32_t unit : access.reads_weights) {
      if (units.weights.count(unit)) {
        EXPECT_TRUE(held.count({Residency::weights, unit})) << op << " reads " << unit;
      }
    }
    for (std::int32_t unit : access.writes_gradients) {
      if (units.gradients.count(unit)) {
        EXPECT_TRUE(held.count({Residency::gradients, unit})) << op << " writes " << unit;
      }
    }
    if (units.weights.count(access.gathers)) {
      EXPECT_TRUE(held.count({Residency::weights, access.gathers})) << op;
    }
    if (units.gradients.count(access.reduces)) {
      EXPECT_TRUE(held.count({Residency::gradients, access.reduces})) << op;
      ++replay.reductions;
    }
    int weights_held = 0;
    for (const auto& [buffer, unit] : held) weights_held += buffer == Residency::weights;
    replay.most_weights_held = std::max(replay.most_weights_held, weights_held);
    for (const ResidencyChange& freed : residency.at(i).release) {
      EXPECT_EQ(held.erase({freed.buffer, freed.unit}), 1u) << op << ": freed what it does not hold";
      // A gradient window ends at the reduction that empties it into the shard.
      if (freed.buffer == Residency::gradients) {
        EXPECT_EQ(access.reduces, freed.unit) << op;
      }
      for (OpIndex other : freed.after) EXPECT_NE(rc.op(other).stream, rc.op(i).stream) << op;
    }
  }
  EXPECT_TRUE(held.empty()) << "buffers left at the iteration's end";
  return replay;
}

// Every class of `plan`: the replay's counts, summed.
Replay replay_plan(const ResidencyPlan& plan) {
  const LoweredResidency lowered = residency_lowering(plan);
  Replay total;
  for (const RankClass& rc : lowered.graph.classes) {
    const RankPlacement placement = placement_of(lowered.strategy, rc.first_rank);
    const ShardedUnits units = sharded_units_of(plan_parameter_units(lowered.scenario, lowered.strategy, placement, 7));
    const std::vector<OpBinding> bindings = bind_ops(rc, plan.tied);
    const StageWeights stage{plan.tied, stage_holds_embedding(lowered.strategy, placement.stage)};
    const WeightResidency residency(rc, bindings, units, stage);
    const Replay replay = replay_residency(rc, bindings, units, stage, residency);
    EXPECT_EQ(residency.windows(), replay.weight_windows + replay.gradient_windows);
    total.weight_windows += replay.weight_windows;
    total.gradient_windows += replay.gradient_windows;
    total.reductions += replay.reductions;
    total.most_weights_held = std::max(total.most_weights_held, replay.most_weights_held);
  }
  return total;
}

TEST(WeightResidency, ZeroThreeHoldsEachUnitWholeBetweenItsGatherAndItsLastReader) {
  for (const ResidencyPlan& plan : {ResidencyPlan{}, ResidencyPlan{1, 1, 2, 3, false, Recompute::full},
                                    ResidencyPlan{2, 2, 2, 3}, ResidencyPlan{1, 1, 2, 3, true}}) {
    const Replay replay = replay_plan(plan);
    EXPECT_GT(replay.weight_windows, 0);
    EXPECT_EQ(replay.gradient_windows, replay.reductions);  // one window per reduction, each emptied by it
    // The unit running and the one prefetched, and a tied table read by the output layer at the pass's end.
    EXPECT_LE(replay.most_weights_held, plan.tied ? 3 : 2) << "tp " << plan.tp << " pp " << plan.pp;
  }
}

// An MoE layer's experts form a unit of their own, gathered and reduced over the expert-data group: sharded there
// at EP 1 (both GPUs hold every expert), kept whole at EP 2 (an expert-data group of one) while the layer's is not.
TEST(WeightResidency, ExpertsUnitsHaveWindowsOfTheirOwnWhereTheExpertDataGroupShardsThem) {
  ResidencyPlan replicated;
  replicated.ep = 1;
  ResidencyPlan split = replicated;
  split.ep = 2;
  const Replay both = replay_plan(replicated), layers_only = replay_plan(split);
  EXPECT_GT(layers_only.weight_windows, 0);
  EXPECT_GT(both.weight_windows, layers_only.weight_windows);
  EXPECT_GT(both.gradient_windows, layers_only.gradient_windows);
  EXPECT_EQ(both.gradient_windows, both.reductions);
}

TEST(WeightResidency, ZeroTwoKeepsWeightsWholeAndGradientsUntilEachReduction) {
  const Replay replay = replay_plan(ResidencyPlan{1, 2, 2, 2});
  EXPECT_EQ(replay.weight_windows, 0);
  EXPECT_GT(replay.gradient_windows, 0);
  EXPECT_EQ(replay.gradient_windows, replay.reductions);
}

TEST(WeightResidency, ZeroOneAndOneReplicaKeepEverythingWhole) {
  for (const ResidencyPlan& plan : {ResidencyPlan{1, 1, 2, 1}, ResidencyPlan{2, 1, 1, 3}}) {
    const Replay replay = replay_plan(plan);
    EXPECT_EQ(replay.weight_windows + replay.gradient_windows, 0) << "zero " << plan.zero << " dp " << plan.dp;
  }
}

// Hand-made ops of layer 0 (a gather on the data-parallel stream, its linear on the compute stream, its reduction):
// what the walk refuses and the waits it adds across streams.
Op residency_op(OpKind kind, OpRole role, Stream stream) {
  Op op;
  op.kind = kind;
  op.role = role;
  op.stream = stream;
  op.layer = 0;
  if (kind == OpKind::gemm) op.gemm = {8, 8, 8};
  if (op.is_communication()) {
    op.layer = -1;
    op.parameter_unit = 0;
    op.group = GroupKind::data;
    op.group_size = 2;
  }
  return op;
}

Op residency_linear(GemmPass pass) {
  Op op = residency_op(OpKind::gemm, OpRole::fc1, Stream::compute);
  op.gemm_pass = pass;
  op.phase = pass == GemmPass::forward ? Phase::forward : Phase::backward;
  return op;
}

TEST(WeightResidency, RefusesWeightsReadBeforeTheGatherAndGradientsWrittenAfterTheReduction) {
  const ShardedUnits units{{0}, {0}};
  RankClass early;
  early.add(residency_linear(GemmPass::forward));
  early.add(residency_op(OpKind::all_gather, OpRole::param_gather, Stream::dp_comm));
  EXPECT_THROW(WeightResidency(early, bind_ops(early), units, {}), std::logic_error);
  RankClass late;
  late.add(residency_op(OpKind::reduce_scatter, OpRole::grad_reduce, Stream::dp_comm));
  late.add(residency_linear(GemmPass::weight_gradient));
  EXPECT_THROW(WeightResidency(late, bind_ops(late), units, {}), std::logic_error);
}

TEST(WeightResidency, OpsOnAnotherStreamWaitForTheBufferAndTheFreeWaitsForThem) {
  RankClass rc;
  const OpIndex gather = rc.add(residency_op(OpKind::all_gather, OpRole::param_gather, Stream::dp_comm));
  const OpIndex forward = rc.add(residency_linear(GemmPass::forward));
  const OpIndex wgrad = rc.add(residency_linear(GemmPass::weight_gradient));
  const OpIndex reduce = rc.add(residency_op(OpKind::reduce_scatter, OpRole::grad_reduce, Stream::dp_comm));
  const WeightResidency residency(rc, bind_ops(rc), ShardedUnits{{0}, {0}}, {});
  EXPECT_EQ(residency.windows(), 2);
  EXPECT_EQ(residency.at(gather).acquire, (std::vector<ResidencyChange>{{Residency::weights, 0, {}}}));
  EXPECT_EQ(residency.at(forward).waits, std::vector<OpIndex>{gather});
  // The forward is the weights' last reader: freed after it, once the gather on the other stream is done.
  EXPECT_EQ(residency.at(forward).release, (std::vector<ResidencyChange>{{Residency::weights, 0, {gather}}}));
  EXPECT_EQ(residency.at(wgrad).acquire, (std::vector<ResidencyChange>{{Residency::gradients, 0, {}}}));
  EXPECT_EQ(residency.at(reduce).waits, std::vector<OpIndex>{wgrad});
  EXPECT_EQ(residency.at(reduce).release, (std::vector<ResidencyChange>{{Residency::gradients, 0, {wgrad}}}));
}

// Each gradient window's first writer of each weight stores into its fresh buffer: under ZeRO-2 over four
// micro-batches every weight has one storing writer per window (per micro-batch), each the first of its window, the
// tied table's too (the output projection stores, the embedding backward adds, though the output layer's own unit is
// reduced between them); under ZeRO-1 (whole buffers) the marks are bind_ops' own, one per weight and step.
TEST(WeightResidency, EachGradientWindowsFirstWriterOfEachWeightStores) {
  for (const auto& [zero, tied] : {std::pair{1, false}, std::pair{2, false}, std::pair{2, true}, std::pair{3, true}}) {
    const LoweredResidency lowered = residency_lowering(ResidencyPlan{1, 1, 2, zero, tied});
    ASSERT_GT(lowered.strategy.num_micro_batches, 1);
    const RankClass& rc = lowered.graph.classes.front();
    const RankPlacement placement = placement_of(lowered.strategy, rc.first_rank);
    const ShardedUnits units = sharded_units_of(plan_parameter_units(lowered.scenario, lowered.strategy, placement, 7));
    std::vector<OpBinding> bindings = bind_ops(rc, tied);
    const std::vector<OpBinding> step_marks = bindings;
    mark_window_first_gradients(rc, bindings, units, StageWeights{tied, true});
    std::map<GradientKey, int> stores, writers;
    std::map<std::pair<GradientKey, int>, bool> seen;  // (weight, micro-batch): a writer met
    for (OpIndex i = 0; i < rc.size(); ++i) {
      const std::optional<GradientKey> key = gradient_key(rc.op(i), bindings[i], tied);
      if (!key) continue;
      ++writers[*key];
      stores[*key] += bindings[i].first_gradient ? 1 : 0;
      // A store is the first writer of its weight in its micro-batch's backward; an add never is.
      const bool first_in_pass = seen.emplace(std::pair{*key, rc.op(i).micro_batch}, true).second;
      if (zero >= 2) EXPECT_EQ(bindings[i].first_gradient, first_in_pass) << op_id(rc.index, i);
      if (zero == 1) EXPECT_EQ(bindings[i].first_gradient, step_marks[i].first_gradient) << op_id(rc.index, i);
    }
    ASSERT_FALSE(stores.empty());
    for (const auto& [key, n] : stores)
      EXPECT_EQ(n, zero >= 2 ? lowered.strategy.num_micro_batches : 1) << "layer " << key.first << " of " << writers[key];
  }
}

TEST(WeightResidency, UncoveredRangesAreTheGapsBetweenTensorsAndThePadding) {
  ParameterUnitLayout unit;
  unit.padded = 40;
  WeightTensor a, b;
  a.offset = 0, a.rows = 2, a.cols = 5;   // [0, 10)
  b.offset = 16, b.rows = 3, b.cols = 4;  // [16, 28)
  unit.tensors = {b, a};                  // in any order
  EXPECT_EQ(uncovered_ranges(unit), (std::vector<ElementRange>{{10, 6}, {28, 12}}));
  unit.padded = 28;
  EXPECT_EQ(uncovered_ranges(unit), (std::vector<ElementRange>{{10, 6}}));
}

// The plan check walks every rank class's windows (executor/plan_check.cpp): a recorded run's plan over two GPUs
// under each ZeRO stage passes it.
TEST(WeightResidency, ThePlanCheckRunsEveryZeroStageOverDataParallelism) {
  for (int zero : {0, 1, 2, 3}) {
    Plan plan = testing_plan_check::executed_plan();
    plan.scenario.cluster.node_groups.front().gpus_per_node = 2;
    plan.strategy.data_parallel_size = 2;
    plan.strategy.zero_stage = zero;
    EXPECT_EQ(testing_plan_check::refusal_path(plan), "") << "ZeRO-" << zero;
  }
}

}  // namespace
}  // namespace twin::exec
