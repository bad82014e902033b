// The output layer's deferred weight gradients (framework.defer_embedding_wgrad_compute, core/framework.hpp): the last
// stage's first `limit` backward passes leave the output projection's weight-gradient GEMM out, and the stage runs
// them after its last backward, their inputs gathered again under SP; its gradient is reduced after them; its memory
// holds their inputs and logits' gradients; the steady-state replays defer as many as the whole run.
#include <algorithm>
#include <vector>

#include <gtest/gtest.h>

#include "framework_lowering_fixture.hpp"
#include "strategies/lower_bound.hpp"
#include "strategies/memory.hpp"
#include "strategies/steady_state.hpp"

namespace twin {
namespace {

using testing_framework::FrameworkLowered;
using testing_framework::lower_with_framework;

// llama-shaped, 8 layers, TP 2 with SP, 2 stages, DP 2: 8 micro-batches of 1,024 tokens.
Scenario deferring_scenario(int limit) {
  Scenario scenario = testing::make_scenario(testing::llama_shaped(8), 1, 1024, 16);
  scenario.framework.defer_embedding_wgrad_compute = true;
  scenario.framework.wgrad_deferral_limit = limit;
  return scenario;
}

const RankClass& last_stage(const IterationGraph& graph) {
  return *std::max_element(graph.classes.begin(), graph.classes.end(),
                           [](const RankClass& a, const RankClass& b) { return a.stage < b.stage; });
}

bool output_wgrad(const Op& op) {
  return op.kind == OpKind::gemm && op.role == OpRole::output_projection && op.gemm_pass == GemmPass::weight_gradient;
}

TEST(DeferredOutputWgrad, TheFirstMicroBatchesRunTheirOutputWeightGradientsAfterTheStagesLastBackward) {
  const FrameworkLowered lowered = lower_with_framework(deferring_scenario(3), testing::make_strategy(2, 2));
  ASSERT_EQ(lowered.strategy.num_micro_batches, 8);
  const RankClass& rc = last_stage(lowered.graph);
  OpIndex last_other_backward = 0, first_deferred = rc.size(), head_reduction = 0;
  std::vector<int> micro_batches;
  for (OpIndex i = 0; i < rc.size(); ++i) {
    const Op& op = rc.op(i);
    if (op.role == OpRole::grad_reduce && op.parameter_unit == kHeadUnit) head_reduction = i;
    if (output_wgrad(op)) micro_batches.push_back(op.micro_batch);
    if (output_wgrad(op) && op.micro_batch < 3) first_deferred = std::min(first_deferred, i);
    else if (op.phase == Phase::backward && op.stream == Stream::compute) last_other_backward = i;
    if (!output_wgrad(op)) continue;
    // The first to run stores into the main gradient (micro-batch 3, the first not deferred), the others add.
    EXPECT_EQ(op.gemm_output, op.micro_batch == 3 ? GemmOutput::written : GemmOutput::added) << op_name(op);
  }
  // Every micro-batch's GEMM, the deferred three last, in micro-batch order, after every other backward op.
  EXPECT_EQ(micro_batches, (std::vector<int>{3, 4, 5, 6, 7, 0, 1, 2}));
  EXPECT_GT(first_deferred, last_other_backward);
  EXPECT_GT(head_reduction, first_deferred);  // the output layer's gradient is reduced once it is whole
  // Each output-layer GEMM reads its input gathered over TP (SP): eight gathers, the drain's three included.
  int gathers = 0;
  for (OpIndex i = 0; i < rc.size(); ++i)
    gathers += rc.op(i).kind == OpKind::all_gather && rc.op(i).linear == OpRole::output_projection &&
               rc.op(i).linear_tensor == LinearTensor::input && rc.op(i).phase == Phase::backward;
  EXPECT_EQ(gathers, 8);
}

// Interleaved, the output layer sits in the last stage's last chunk; a limit above the micro-batches defers them all,
// and the drain's first GEMM (micro-batch 0) stores.
TEST(DeferredOutputWgrad, InterleavedTheLastChunksGemmsAllDeferUnderALimitAboveTheMicroBatches) {
  const Strategy interleaved = testing::make_strategy(2, 2, 1, true, 2, Schedule::interleaved_1f1b);
  const FrameworkLowered lowered = lower_with_framework(deferring_scenario(50), interleaved);
  ASSERT_EQ(lowered.strategy.num_micro_batches, 8);
  const RankClass& rc = last_stage(lowered.graph);
  OpIndex last_other_backward = 0, first_gemm = rc.size();
  std::vector<int> micro_batches;
  for (OpIndex i = 0; i < rc.size(); ++i) {
    const Op& op = rc.op(i);
    if (!output_wgrad(op)) {
      if (op.phase == Phase::backward && op.stream == Stream::compute) last_other_backward = i;
      continue;
    }
    first_gemm = std::min(first_gemm, i);
    micro_batches.push_back(op.micro_batch);
    EXPECT_EQ(op.chunk, 1) << op_name(op);
    EXPECT_EQ(op.gemm_output, op.micro_batch == 0 ? GemmOutput::written : GemmOutput::added) << op_name(op);
  }
  EXPECT_EQ(micro_batches, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_GT(first_gemm, last_other_backward);
}

TEST(DeferredOutputWgrad, OnlyTheLastStageChangesAndNothingWithoutTheSwitch) {
  const Strategy pp2 = testing::make_strategy(2, 2);
  Scenario plain = deferring_scenario(3);
  plain.framework.defer_embedding_wgrad_compute = false;
  plain.framework.wgrad_deferral_limit = 0;
  const FrameworkLowered without = lower_with_framework(plain, pp2);
  const FrameworkLowered with = lower_with_framework(deferring_scenario(3), pp2);
  ASSERT_EQ(without.graph.classes.size(), with.graph.classes.size());
  for (std::size_t c = 0; c < with.graph.classes.size(); ++c) {
    const RankClass& a = without.graph.classes[c];
    const RankClass& b = with.graph.classes[c];
    ASSERT_EQ(a.size(), b.size());  // the same ops, moved
    bool same_order = true;
    for (OpIndex i = 0; i < a.size(); ++i) same_order &= op_name(a.op(i)) == op_name(b.op(i));
    EXPECT_EQ(same_order, a.stage == 0) << a.label;
  }
  // Without pipeline parallelism Megatron does not defer (a search's one-stage candidates).
  const FrameworkLowered one_stage = lower_with_framework(deferring_scenario(3), testing::make_strategy(2, 1));
  plain.framework = FrameworkConfig{};
  const FrameworkLowered one_stage_plain = lower_with_framework(plain, testing::make_strategy(2, 1));
  for (std::size_t c = 0; c < one_stage.graph.classes.size(); ++c)
    for (OpIndex i = 0; i < one_stage.graph.classes[c].size(); ++i)
      EXPECT_EQ(op_name(one_stage.graph.classes[c].op(i)), op_name(one_stage_plain.graph.classes[c].op(i)));
}

// Under ZeRO-2 every micro-batch's gradient is reduced from a fresh buffer: a deferred one's after its own GEMM.
TEST(DeferredOutputWgrad, AStepThatReducesEveryMicroBatchReducesEachDeferredGradientAfterItsGemm) {
  Strategy zero2 = testing::make_strategy(2, 2);
  zero2.zero_stage = 2;
  const FrameworkLowered lowered = lower_with_framework(deferring_scenario(3), zero2);
  const RankClass& rc = last_stage(lowered.graph);
  std::vector<int> reduced_after;  // the micro-batch of the output-layer GEMM before each head reduction
  int last_gemm = -1;
  for (OpIndex i = 0; i < rc.size(); ++i) {
    if (output_wgrad(rc.op(i))) last_gemm = rc.op(i).micro_batch;
    if (rc.op(i).role == OpRole::grad_reduce && rc.op(i).parameter_unit == kHeadUnit) reduced_after.push_back(last_gemm);
  }
  EXPECT_EQ(reduced_after, (std::vector<int>{3, 4, 5, 6, 7, 0, 1, 2}));
}

TEST(DeferredOutputWgrad, TheLastStageHoldsEachDeferredMicroBatchsInputAndLogitsGradient) {
  Scenario scenario = deferring_scenario(3);
  scenario.cluster.node_groups[0].gpu = *gpu_preset("H100-SXM-80GB");
  Strategy pp2 = testing::make_strategy(2, 2);
  ASSERT_EQ(complete_strategy(scenario, pp2), std::nullopt);
  const MemoryEstimate with = estimate_memory(scenario, pp2);
  scenario.framework = FrameworkConfig{};
  const MemoryEstimate without = estimate_memory(scenario, pp2);
  // 1,024 rows: the input's 512 rows of this TP rank (SP) x 1,024 x 2 B, the logits' gradient 1,024 x 16,000 x 2 B.
  const Bytes per_micro_batch = 512 * 1024 * 2 + 1024 * 16000 * 2;
  EXPECT_EQ(deferred_output_wgrad_bytes(scenario, 1024, 2, true), per_micro_batch);
  EXPECT_EQ(with.per_stage[0].activations, without.per_stage[0].activations);
  EXPECT_EQ(with.per_stage[1].activations, without.per_stage[1].activations + 3 * per_micro_batch);
}

// The search's bound of a deferring strategy: lowered without the deferral, every stage's chain but the last's; the
// scaled one equals the whole graph's, and the replay does not beat it.
TEST(DeferredOutputWgrad, TheLowerBoundHoldsAndScales) {
  for (const Strategy& strategy : {testing::make_strategy(2, 2), testing::make_strategy(2, 4),
                                   testing::make_strategy(2, 2, 1, true, 2, Schedule::interleaved_1f1b)}) {
    const FrameworkLowered lowered = lower_with_framework(deferring_scenario(3), strategy);
    const Profile& profile = builtin_profile();
    const TimeNs bound = compute_lower_bound_ns(lowered.scenario, lowered.strategy, profile);
    EXPECT_EQ(bound, compute_lower_bound_full_ns(lowered.scenario, lowered.strategy, profile)) << strategy.key();
    EXPECT_LE(bound, testing_framework::iteration_ns(lowered)) << strategy.key();
  }
}

TEST(DeferredOutputWgrad, TheSteadyStateReplaysDeferAsManyAsTheWholeRun) {
  Scenario scenario = deferring_scenario(3);
  scenario.training.global_batch_size = 128;  // 64 micro-batches
  Strategy pp2 = testing::make_strategy(2, 2);
  ASSERT_EQ(complete_strategy(scenario, pp2), std::nullopt);
  const std::optional<SteadyStateReplay> plain = steady_state_counts(testing::make_scenario(scenario.model, 1, 1024, 128), pp2);
  ASSERT_TRUE(plain.has_value());
  EXPECT_EQ(plain->first_micro_batches, 2);  // W and 4W, W = 2
  const std::optional<SteadyStateReplay> deferred = steady_state_counts(scenario, pp2);
  ASSERT_TRUE(deferred.has_value());
  EXPECT_EQ(deferred->first_micro_batches, 4);  // a pipeline round past the limit
  EXPECT_EQ(deferred->second_micro_batches, 10);
  scenario.framework.wgrad_deferral_limit = 0;  // every micro-batch: the drain grows with the count
  EXPECT_FALSE(steady_state_counts(scenario, pp2).has_value());
}

}  // namespace
}  // namespace twin
