// PyTorch FSDP2 with DTensor (framework.name pytorch-fsdp2, strategies/pytorch_fsdp2.hpp): its copies around the
// collectives, the reduce dtype, which weights the backward gathers again, eager PyTorch's extra memory passes that
// torch.compile removes, and the host's dispatch time spread over a layer's ops. FSDP1 (pytorch-fsdp): the same but
// for its flat parameters.
#include <gtest/gtest.h>

#include "cost/profile.hpp"
#include "sim/simulate.hpp"
#include "strategies/lowering.hpp"
#include "strategies/lowering_emitter.hpp"
#include "strategies/pytorch_fsdp2.hpp"
#include "strategies/sharded_parameters.hpp"
#include "strategies/validity.hpp"
#include "strategy_fixtures.hpp"

namespace twin {
namespace {

constexpr int kLayers = 4;

struct Fsdp2Lowered {
  Scenario scenario;
  Strategy strategy;
  IterationGraph graph;
};

// Llama-shaped, 4 layers, on the 8 GPUs of one node: FSDP over 8 / tp, one micro-batch of 1 per data rank.
Fsdp2Lowered lower_fsdp2(bool pytorch, int tp = 1, bool compile = false, bool reshard = true, int reduce_bytes = 4,
                         const ModelConfig& model = testing::llama_shaped(kLayers),
                         FrameworkName name = FrameworkName::pytorch_fsdp2) {
  Scenario scenario = testing::make_scenario(model, 1, 2048, 8 / tp);
  if (pytorch) {
    scenario.framework.name = name;
    scenario.framework.compile = compile;
    scenario.framework.reshard_after_forward = reshard;
    scenario.framework.reduce_dtype_bytes = reduce_bytes;
  }
  Strategy z3 = testing::make_strategy(tp, 1, 1, false);
  z3.zero_stage = 3;
  z3.micro_batch_size = 1;
  EXPECT_EQ(complete_strategy(scenario, z3), std::nullopt);
  EXPECT_EQ(invalid_reason(scenario, z3), std::nullopt);
  IterationGraph graph = lower_to_op_graphs(scenario, z3);
  check_well_formed(graph);
  return {scenario, z3, std::move(graph)};
}

template <class Pred>
std::vector<Op> ops_where(const IterationGraph& g, Pred pred) {
  std::vector<Op> out;
  for (const RankClass& rc : g.classes)
    for (OpIndex i = 0; i < rc.size(); ++i)
      if (pred(rc.op(i))) out.push_back(rc.op(i));
  return out;
}

TEST(PytorchFsdp2, CopiesSurroundTheCollectivesAndGradientsAreReducedInTheReduceDtype) {
  const Fsdp2Lowered megatron = lower_fsdp2(false), fsdp2 = lower_fsdp2(true);
  const auto copies = [](const IterationGraph& g, OpRole role) {
    return ops_where(g, [&](const Op& op) { return op.kind == OpKind::elementwise && op.role == role; });
  };
  EXPECT_TRUE(copies(megatron.graph, OpRole::param_gather).empty());
  EXPECT_TRUE(copies(megatron.graph, OpRole::grad_reduce).empty());
  const auto gathers = ops_where(fsdp2.graph, [](const Op& op) { return op.kind == OpKind::all_gather; });
  // A copy in before each gather (data-parallel stream) and a copy out after it (compute stream).
  EXPECT_EQ(copies(fsdp2.graph, OpRole::param_gather).size(), 2 * gathers.size());
  const std::int64_t layer = layer_parameters_per_rank(fsdp2.scenario.model, 0, 1, 1).dense;
  for (const Op& op : copies(fsdp2.graph, OpRole::param_gather))
    if (op.parameter_unit == 1)
      EXPECT_EQ(op.bytes, op.stream == Stream::dp_comm ? (layer + 7) / 8 * 6 : layer * 4);
  for (const Op& op : ops_where(fsdp2.graph, [](const Op& op) { return op.kind == OpKind::reduce_scatter; }))
    if (op.parameter_unit == 1) EXPECT_EQ(op.bytes, layer * 4);  // fp32: twice Megatron's bf16
  for (const Op& op : ops_where(lower_fsdp2(true, 1, false, true, 2).graph,
                                [](const Op& op) { return op.kind == OpKind::reduce_scatter; }))
    if (op.parameter_unit == 1) EXPECT_EQ(op.bytes, layer * 2);
  EXPECT_EQ(copies(fsdp2.graph, OpRole::grad_reduce).size(), kLayers + 2u);  // every unit's _chunk_cat
}

TEST(PytorchFsdp2, TheBackwardGathersAgainAllBlocksButTheLastAndNothingWithoutResharding) {
  const auto backward_gathers = [](const Fsdp2Lowered& l) {
    return ops_where(l.graph, [](const Op& op) { return op.kind == OpKind::all_gather && op.phase == Phase::backward; });
  };
  // Forward: every unit (embedding, 4 layers, output layer); backward: layers 0 .. 2.
  const auto regathered = backward_gathers(lower_fsdp2(true));
  ASSERT_EQ(regathered.size(), kLayers - 1u);
  for (const Op& op : regathered) EXPECT_LT(op.parameter_unit, kLayers - 1);
  EXPECT_TRUE(backward_gathers(lower_fsdp2(true, 1, false, false)).empty());
  EXPECT_EQ(backward_gathers(lower_fsdp2(false)).size(), kLayers + 2u);  // Megatron's ZeRO-3 regathers every unit
}

Fsdp2Lowered lower_fsdp1(int reduce_bytes = 4) {
  return lower_fsdp2(true, 1, false, true, reduce_bytes, testing::llama_shaped(kLayers), FrameworkName::pytorch_fsdp);
}

// FSDP1 gathers into the flat parameter its module's weights are views of: the shard's cast to bf16 before each gather
// (FSDP2's copy-in bytes) and no copy after it; before each reduce-scatter the whole gradient cast to the reduce dtype
// and divided in place by the predivide factor; every block freed after its forward, the root kept.
TEST(PytorchFsdp1, FlatParametersGatherInPlaceAndTheGradientIsCastAndDividedBeforeItsReduction) {
  const Fsdp2Lowered fsdp1 = lower_fsdp1(), fsdp2 = lower_fsdp2(true);
  const auto copies = [](const IterationGraph& g, OpRole role) {
    return ops_where(g, [&](const Op& op) { return op.kind == OpKind::elementwise && op.role == role; });
  };
  const std::int64_t layer = layer_parameters_per_rank(fsdp1.scenario.model, 0, 1, 1).dense;
  const auto gathers = ops_where(fsdp1.graph, [](const Op& op) { return op.kind == OpKind::all_gather; });
  ASSERT_EQ(copies(fsdp1.graph, OpRole::param_gather).size(), gathers.size());
  for (const Op& op : copies(fsdp1.graph, OpRole::param_gather)) {
    EXPECT_EQ(op.stream, Stream::dp_comm);
    if (op.parameter_unit == 1) EXPECT_EQ(op.bytes, (layer + 7) / 8 * 6);
  }
  ASSERT_EQ(copies(fsdp1.graph, OpRole::grad_reduce).size(), kLayers + 2u);
  for (const Op& op : copies(fsdp1.graph, OpRole::grad_reduce))
    if (op.parameter_unit == 1) EXPECT_EQ(op.bytes, layer * (2 + 4 + 4 + 4));
  for (const Op& op : copies(lower_fsdp1(2).graph, OpRole::grad_reduce))
    if (op.parameter_unit == 1) EXPECT_EQ(op.bytes, layer * (2 + 2));  // bf16: no cast, the division only
  const auto backward_gathers = [](const Fsdp2Lowered& l) {
    return ops_where(l.graph, [](const Op& op) { return op.kind == OpKind::all_gather && op.phase == Phase::backward; });
  };
  EXPECT_EQ(backward_gathers(fsdp1).size(), kLayers + 0u);
  EXPECT_EQ(backward_gathers(fsdp2).size(), kLayers - 1u);
  // Eager PyTorch's kernels and host time are FSDP2's.
  for (OpRole role : {OpRole::input_norm, OpRole::mlp_norm, OpRole::rope, OpRole::activation})
    EXPECT_EQ(copies(fsdp1.graph, role).size(), copies(fsdp2.graph, role).size()) << to_string(role);
  EXPECT_FALSE(ops_where(fsdp1.graph, [](const Op& op) { return op.dispatch_ns > 0; }).empty());
}

TEST(PytorchFsdp2, EagerAddsMemoryPassesAfterNormRopeAndActivationThatCompileRemoves) {
  const auto passes = [](const Fsdp2Lowered& l, OpRole role) {
    return ops_where(l.graph, [&](const Op& op) { return op.kind == OpKind::elementwise && op.role == role; });
  };
  const Fsdp2Lowered eager = lower_fsdp2(true), compiled = lower_fsdp2(true, 1, true);
  for (OpRole role : {OpRole::input_norm, OpRole::mlp_norm, OpRole::rope, OpRole::activation}) {
    EXPECT_EQ(passes(eager, role).size(), 2u * kLayers) << to_string(role);  // forward and backward of each layer
    EXPECT_TRUE(passes(compiled, role).empty()) << to_string(role);
    EXPECT_TRUE(passes(lower_fsdp2(false), role).empty()) << to_string(role);
  }
  const lowering::RankShapes s = lowering::rank_shapes(eager.scenario, eager.strategy);
  for (const Op& op : passes(eager, OpRole::activation))
    EXPECT_EQ(op.bytes, (op.phase == Phase::forward ? 4 : 8) * s.tokens * s.ffn);
}

// Transformer Engine's modules under FSDP2 (NeMo AutoModel's te backend): no eager passes, as compile, but the host's
// time per layer stays eager PyTorch's, which compile's measured row would shorten.
TEST(PytorchFsdp2, TransformerEngineKernelsRemoveThePassesAndKeepTheEagerHostTime) {
  Fsdp2Lowered eager = lower_fsdp2(true);
  Scenario te_scenario = eager.scenario;
  te_scenario.framework.transformer_engine_kernels = true;
  const IterationGraph te = lower_to_op_graphs(te_scenario, eager.strategy);
  check_well_formed(te);
  for (OpRole role : {OpRole::input_norm, OpRole::mlp_norm, OpRole::rope, OpRole::activation})
    EXPECT_TRUE(ops_where(te, [&](const Op& op) { return op.kind == OpKind::elementwise && op.role == role; }).empty())
        << to_string(role);
  const auto dispatch_ns = [](const IterationGraph& g) {
    TimeNs sum = 0;
    for (const RankClass& rc : g.classes)
      for (OpIndex i = 0; i < rc.size(); ++i) sum += rc.graph[i].dispatch_ns;
    return sum;
  };
  // Each layer's time is spread over its ops: fewer ops, the same sum but for the integer division's remainders.
  EXPECT_NEAR(static_cast<double>(dispatch_ns(te)), static_cast<double>(dispatch_ns(eager.graph)), 1000.0);
  EXPECT_GT(dispatch_ns(te), dispatch_ns(lower_fsdp2(true, 1, true).graph));
}

// The passes follow what each op says it is: PyTorch runs a LayerNorm and a GeLU as one kernel each way (a LayerNorm's
// backward reads dy and x again for its weight and bias), and a QK-norm's RMSNorm as the reference's RMSNorm.
TEST(PytorchFsdp2, EagerPassesFollowTheNormAndActivationEachOpCarries) {
  ModelConfig gpt = testing::llama_shaped(kLayers);
  gpt.normalization = Normalization::layernorm;
  gpt.activation = Activation::gelu;
  gpt.ffn_hidden_size = 4096;
  gpt.add_bias_linear = true;
  gpt.position_embedding_rope = false;
  const Fsdp2Lowered lowered = lower_fsdp2(true, 1, false, true, 4, gpt);
  const lowering::RankShapes s = lowering::rank_shapes(lowered.scenario, lowered.strategy);
  const auto passes = [&](OpRole role) {
    return ops_where(lowered.graph, [&](const Op& op) { return op.kind == OpKind::elementwise && op.role == role; });
  };
  EXPECT_TRUE(passes(OpRole::activation).empty());
  EXPECT_TRUE(passes(OpRole::rope).empty());
  for (OpRole role : {OpRole::input_norm, OpRole::mlp_norm}) {
    ASSERT_EQ(passes(role).size(), 1u * kLayers) << to_string(role);  // the backward's weight-gradient pass only
    for (const Op& op : passes(role)) {
      EXPECT_EQ(op.phase, Phase::backward);
      EXPECT_EQ(op.bytes, 4 * s.tokens_local * s.h);
    }
  }
  ModelConfig qwen = testing::llama_shaped(kLayers);
  qwen.qk_layernorm = true;
  const Fsdp2Lowered qk = lower_fsdp2(true, 1, false, true, 4, qwen);
  const lowering::RankShapes q = lowering::rank_shapes(qk.scenario, qk.strategy);
  const auto qk_passes =
      ops_where(qk.graph, [](const Op& op) { return op.kind == OpKind::elementwise && op.role == OpRole::qk_norm; });
  ASSERT_EQ(qk_passes.size(), 2u * kLayers);
  for (const Op& op : qk_passes)
    EXPECT_EQ(op.bytes, (op.phase == Phase::forward ? 32 : 58) * q.tokens * (q.heads + q.groups) * q.d);
}

TEST(PytorchFsdp2, EachLayerPassCarriesItsMeasuredHostTimeSpreadOverItsOps) {
  const Fsdp2Lowered eager = lower_fsdp2(true);
  const lowering::PytorchHostCost& cost = lowering::pytorch_host_cost(1, Recompute::none, false);
  for (int layer = 0; layer < kLayers; ++layer)
    for (Phase phase : {Phase::forward, Phase::backward}) {
      TimeNs sum = 0;
      for (const Op& op : ops_where(eager.graph, [&](const Op& op) { return op.layer == layer && op.phase == phase; })) {
        EXPECT_EQ(op.dispatch_ns > 0, op.stream != Stream::dp_comm && op.role != OpRole::param_gather) << op_name(op);
        sum += op.dispatch_ns;
      }
      const TimeNs want = phase == Phase::forward ? cost.forward_ns : cost.backward_ns;
      EXPECT_NEAR(static_cast<double>(sum), static_cast<double>(want), 200.0) << layer;  // integer division's rest
    }
  EXPECT_TRUE(ops_where(lower_fsdp2(false).graph, [](const Op& op) { return op.dispatch_ns > 0; }).empty());
  // The host bounds a step whose kernels are short: TP 4 of a small model runs no faster than the host issues it.
  const Fsdp2Lowered tp4 = lower_fsdp2(true, 4);
  const TimeNs iteration = simulate_iteration(tp4.graph, tp4.scenario.cluster, builtin_profile()).iteration_ns;
  TimeNs dispatched = 0;
  for (const Op& op : ops_where(tp4.graph, [](const Op&) { return true; })) dispatched += op.dispatch_ns;
  EXPECT_GE(iteration, dispatched);
}

TEST(PytorchFsdp2, AnUnmeasuredConfigurationTakesTheNearestMeasuredRow) {
  const auto& row = [](int tp, Recompute r, bool compiled) { return lowering::pytorch_host_cost(tp, r, compiled); };
  EXPECT_EQ(row(1, Recompute::none, false).forward_ns, lowering::kPytorchHostCosts[0].forward_ns);
  EXPECT_EQ(row(1, Recompute::selective, false).forward_ns, lowering::kPytorchHostCosts[0].forward_ns);
  EXPECT_EQ(row(8, Recompute::none, false).tp, 4);
  EXPECT_EQ(row(2, Recompute::full, false).tp, 1);  // eager with checkpointing was measured at TP 1 only
  EXPECT_TRUE(row(2, Recompute::full, false).full_recompute);
  EXPECT_EQ(row(2, Recompute::none, true).tp, 1);   // compiled without checkpointing: at TP 1
  EXPECT_TRUE(row(2, Recompute::none, true).compiled);
}

// The host's time of each part of a plan's step, summed over the ops of `layer` (forward, backward), of the
// optimizer phase and of the ops outside the layers.
struct Fsdp2HostSums {
  TimeNs forward = 0, backward = 0, optimizer = 0, fixed = 0;
};
Fsdp2HostSums fsdp2_host_sums(const Fsdp2Lowered& l, int layer) {
  Fsdp2HostSums sums;
  for (const Op& op : ops_where(l.graph, [](const Op&) { return true; })) {
    if (op.phase == Phase::optimizer) sums.optimizer += op.dispatch_ns;
    else if (op.layer < 0) sums.fixed += op.dispatch_ns;
    else if (op.layer == layer) (op.phase == Phase::forward ? sums.forward : sums.backward) += op.dispatch_ns;
  }
  return sums;
}

void expect_host_sums(const Fsdp2Lowered& l, const Fsdp2HostSums& want, const char* what) {
  for (int layer = 0; layer < kLayers; ++layer) {
    const Fsdp2HostSums got = fsdp2_host_sums(l, layer);
    EXPECT_NEAR(static_cast<double>(got.forward), static_cast<double>(want.forward), 200.0) << what << layer;
    EXPECT_NEAR(static_cast<double>(got.backward), static_cast<double>(want.backward), 200.0) << what << layer;
    EXPECT_NEAR(static_cast<double>(got.optimizer), static_cast<double>(want.optimizer), 200.0) << what;
    EXPECT_NEAR(static_cast<double>(got.fixed), static_cast<double>(want.fixed), 200.0) << what;
  }
}

TEST(PytorchFsdp2, TensorParallelAndFsdpAloneCarryTheFourGpuHostTableByHandCount) {
  // The rows of docs/FRAMEWORK.md "PyTorch FSDP2" (4 H200s' host, 2026-11-28), by hand: per layer forward, backward,
  // the optimizer's share times the layers, and the fixed part per step. The two-GPU model of the TP host
  // (docs/ACCURACY.md "The host of DTensor TP steps") predicted worse and left these unchanged.
  expect_host_sums(lower_fsdp2(true, 2), {8'354'000, 13'920'000, 614'000 * kLayers, 0}, "TP 2, layer ");
  expect_host_sums(lower_fsdp2(true, 4), {4'968'000, 11'462'000, 208'000 * kLayers, 8'968'000}, "TP 4, layer ");
  expect_host_sums(lower_fsdp2(true, 1), {3'423'000, 3'481'000, 631'000 * kLayers, 1'072'000}, "TP 1, layer ");
}

}  // namespace
}  // namespace twin
