// framework.deepspeed_bf16_optimizer (core/framework.hpp): DeepSpeed's BF16_Optimizer of April 2022 (56c522386) as
// its pipeline engine drives it, against twin's ZeRO-1 distributed optimizer on the same plan. The bytes, groups
// and order of the ops are the source's; nothing here is a price.
#include <functional>

#include <gtest/gtest.h>

#include "cost/profile.hpp"
#include "sim/simulate.hpp"
#include "strategies/lowering.hpp"
#include "strategies/memory.hpp"
#include "strategies/sharded_parameters.hpp"
#include "strategies/validity.hpp"
#include "strategy_fixtures.hpp"

namespace twin {
namespace {

struct Bf16OptimizerLowered {
  Scenario scenario;
  Strategy strategy;
  IterationGraph graph;
};

// gpt_shaped (tied embeddings) on two 8-GPU nodes: TP 2 x PP 2 x DP 4, ZeRO-1, no SP, both overlaps off as
// DeepSpeed's pipeline engine runs; `bf16_optimizer` states the switch.
Bf16OptimizerLowered lower_bf16_optimizer_plan(bool bf16_optimizer) {
  Scenario scenario = testing::make_scenario(testing::gpt_shaped(), 2, 2048, 32);
  scenario.cluster.node_groups[0].gpu = *gpu_preset("H100-SXM-80GB");
  scenario.framework.overlap_grad_reduce = false;
  scenario.framework.overlap_param_gather = false;
  scenario.framework.deepspeed_bf16_optimizer = bf16_optimizer;
  Strategy strategy = testing::make_strategy(2, 2, 1, false);
  strategy.zero_stage = 1;
  EXPECT_EQ(complete_strategy(scenario, strategy), std::nullopt);
  EXPECT_EQ(invalid_reason(scenario, strategy), std::nullopt) << strategy.key();
  IterationGraph graph = lower_to_op_graphs(scenario, strategy);
  check_well_formed(graph);
  return {scenario, strategy, std::move(graph)};
}

int count_in(const RankClass& rc, const std::function<bool(const Op&)>& wanted) {
  int n = 0;
  for (OpIndex i = 0; i < rc.size(); ++i) n += wanted(rc.op(i)) ? 1 : 0;
  return n;
}

bool data_parallel(const Op& op, OpKind kind, OpRole role) {
  return op.kind == kind && op.role == role && op.group == GroupKind::data;
}

TEST(Bf16OptimizerLowering, AllReducesTheFp32BufferInBf16AndGathersTheBf16Weights) {
  const Bf16OptimizerLowered distributed = lower_bf16_optimizer_plan(false);
  const Bf16OptimizerLowered deepspeed = lower_bf16_optimizer_plan(true);
  ASSERT_EQ(deepspeed.strategy.data_parallel_size, 4);
  for (const RankClass& rc : deepspeed.graph.classes) {
    const std::int64_t elements =
        stage_parameters_per_rank(deepspeed.scenario.model, deepspeed.strategy, rc.stage).dense;
    // One all-reduce of the whole stage's gradients over the data group, 2 bytes each (communication_data_type
    // bf16), no reduce-scatter; the fp32 buffer cast down before it (4 + 2 bytes), scaled by 1/dp (2 + 2) and
    // copied back (2 + 4) after it.
    EXPECT_EQ(count_in(rc, [](const Op& op) { return data_parallel(op, OpKind::reduce_scatter, OpRole::grad_reduce); }), 0);
    ASSERT_EQ(count_in(rc, [](const Op& op) { return data_parallel(op, OpKind::all_reduce, OpRole::grad_reduce); }), 1);
    for (OpIndex i = 1; i + 2 < rc.size(); ++i) {
      if (!data_parallel(rc.op(i), OpKind::all_reduce, OpRole::grad_reduce)) continue;
      EXPECT_EQ(rc.op(i).group_size, 4);
      EXPECT_EQ(rc.op(i).bytes, elements * 2);
      EXPECT_EQ(rc.op(i).parameter_unit, kWholeStage);
      for (const auto& [at, bytes] : {std::pair{i - 1, 6 * elements}, {i + 1, 4 * elements}, {i + 2, 6 * elements}}) {
        EXPECT_EQ(rc.op(at).kind, OpKind::elementwise) << op_name(rc.op(at));
        EXPECT_EQ(rc.op(at).role, OpRole::grad_reduce) << op_name(rc.op(at));
        EXPECT_EQ(rc.op(at).bytes, bytes) << op_name(rc.op(at));
        EXPECT_EQ(rc.op(at).phase, Phase::optimizer) << op_name(rc.op(at));  // once an iteration (the lower bound)
      }
    }
    // step() all-gathers the bf16 weights once, as the distributed optimizer does.
    ASSERT_EQ(count_in(rc, [](const Op& op) { return data_parallel(op, OpKind::all_gather, OpRole::param_gather); }), 1);
    for (OpIndex i = 0; i < rc.size(); ++i)
      if (data_parallel(rc.op(i), OpKind::all_gather, OpRole::param_gather)) EXPECT_EQ(rc.op(i).bytes, elements * 2);
    // The gradient norm reads the whole fp32 buffer (4 bytes a gradient) before the step.
    EXPECT_EQ(count_in(rc, [&](const Op& op) {
                return op.kind == OpKind::elementwise && op.role == OpRole::optimizer && op.bytes == 4 * elements;
              }), 1);
  }
  // The distributed optimizer reduce-scatters the same 2 bytes a gradient, one unit at a time.
  for (const RankClass& rc : distributed.graph.classes) {
    const std::int64_t elements =
        stage_parameters_per_rank(distributed.scenario.model, distributed.strategy, rc.stage).dense;
    std::int64_t scattered = 0;
    for (OpIndex i = 0; i < rc.size(); ++i)
      if (data_parallel(rc.op(i), OpKind::reduce_scatter, OpRole::grad_reduce)) scattered += rc.op(i).bytes;
    EXPECT_EQ(scattered, elements * 2);
    EXPECT_EQ(count_in(rc, [](const Op& op) { return data_parallel(op, OpKind::all_reduce, OpRole::grad_reduce); }), 0);
  }
}

TEST(Bf16OptimizerLowering, TiedWeightsSumFp32GradientsAndTheBufferIsHeldWhole) {
  const Bf16OptimizerLowered distributed = lower_bf16_optimizer_plan(false);
  const Bf16OptimizerLowered deepspeed = lower_bf16_optimizer_plan(true);
  const auto tied = [](const Op& op) { return op.role == OpRole::embedding_grad_sync; };
  for (std::size_t c = 0; c < deepspeed.graph.classes.size(); ++c) {
    const RankClass& with = deepspeed.graph.classes[c];
    const RankClass& without = distributed.graph.classes[c];
    ASSERT_EQ(count_in(with, tied), 1);  // the first and the last stage each hold a copy of the embedding
    for (OpIndex i = 0, j = 0; i < with.size() && j < without.size(); ++i, ++j) {
      while (i < with.size() && !tied(with.op(i))) ++i;
      while (j < without.size() && !tied(without.op(j))) ++j;
      if (i < with.size() && j < without.size()) EXPECT_EQ(with.op(i).bytes, 2 * without.op(j).bytes);  // fp32 over bf16
    }
  }
  // Memory: the fp32 gradients, 4 bytes each, beside the bf16 ones and unsharded.
  const MemoryEstimate with = estimate_memory(deepspeed.scenario, deepspeed.strategy);
  const MemoryEstimate without = estimate_memory(distributed.scenario, distributed.strategy);
  for (int stage = 0; stage < 2; ++stage) {
    const std::int64_t elements =
        stage_parameters_per_rank(deepspeed.scenario.model, deepspeed.strategy, stage).dense;
    EXPECT_EQ(with.per_stage[stage].gradients - without.per_stage[stage].gradients, 4 * elements);
    EXPECT_EQ(with.per_stage[stage].optimizer_states, without.per_stage[stage].optimizer_states);
  }
  // The engine runs it: an all-reduce moves twice a reduce-scatter's bytes over the same ring.
  const Profile& profile = builtin_profile();
  EXPECT_GT(simulate_iteration(deepspeed.graph, deepspeed.scenario.cluster, profile).iteration_ns,
            simulate_iteration(distributed.graph, distributed.scenario.cluster, profile).iteration_ns);
}

}  // namespace
}  // namespace twin
