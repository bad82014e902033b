// FP8 linears in the lowering and the memory model (strategies/fp8_linears.hpp): casts of inputs and output
// gradients in the layers that run in FP8 and none elsewhere, FP8 operands per pass, SP gathers of 1 byte per
// element, one cast of the weights after the step, the same ops whether passes repeat or not; memory that counts the
// FP8 copies, less the 16-bit weights under param_gather, and FP8 copies of the weight-gradient inputs.
#include <gtest/gtest.h>

#include "strategies/fp8_linears.hpp"
#include "strategies/lowering.hpp"
#include "strategies/lowering_emitter.hpp"
#include "strategies/memory.hpp"
#include "strategies/validity.hpp"
#include "strategy_fixtures.hpp"

namespace twin {
namespace {

Scenario fp8_scenario(Fp8Config fp8) {
  Scenario s = testing::make_scenario(testing::llama_shaped(4), 1, 2048, 16);
  s.cluster.node_groups.front().gpu.peak_fp8_tflops = 1978.9;
  s.training.fp8 = fp8;
  return s;
}

Fp8Config tensorwise_with_bf16_edges() {
  Fp8Config fp8;
  fp8.recipe = Fp8Recipe::tensorwise;
  fp8.first_last_layers_bf16 = true;
  return fp8;
}

struct Counts {
  int casts_per_layer[4] = {0, 0, 0, 0};
  int weight_casts = 0, fp8_gemms = 0, bf16_linear_gemms = 0, fp8_gathers = 0, gathers = 0, transposes = 0;
};

Counts count(const Scenario& scenario, const Strategy& strategy) {
  const IterationGraph graph = lower_to_op_graphs(scenario, strategy);
  const RankClass& rc = graph.classes.front();
  const lowering::RankShapes shapes = lowering::rank_shapes(scenario, strategy);
  Counts c;
  for (OpIndex i = 0; i < rc.size(); ++i) {
    const Op& op = rc.op(i);
    if (op.micro_batch > 0) continue;  // one micro-batch's ops and the step's
    if (op.kind == OpKind::fp8_cast) {
      if (op.linear_tensor == LinearTensor::weight) ++c.weight_casts;
      else ++c.casts_per_layer[op.layer];
    }
    if (op.kind == OpKind::gemm && op.layer >= 0) {
      const bool fp8_layer = layer_runs_fp8(*scenario.training.fp8, op.layer, 4);
      if (is_fp8(op.gemm)) ++c.fp8_gemms;
      else ++c.bf16_linear_gemms;
      EXPECT_EQ(is_fp8(op.gemm), fp8_layer) << op_name(op);
      if (is_fp8(op.gemm)) EXPECT_EQ(op.gemm.e5m2, op.gemm_pass != GemmPass::forward) << op_name(op);
    }
    c.transposes += op.kind == OpKind::fp8_transpose;
    if (op.kind == OpKind::all_gather && op.group == GroupKind::tensor) {
      ++c.gathers;
      if (op.bytes == shapes.tokens * shapes.h) ++c.fp8_gathers;
    }
  }
  return c;
}

TEST(Fp8Lowering, CastsAndOperandsInTheFp8LayersOnly) {
  Strategy strategy = testing::make_strategy(2, 1, 1, true);
  strategy.zero_stage = 1;
  Scenario scenario = fp8_scenario(tensorwise_with_bf16_edges());
  ASSERT_FALSE(complete_strategy(scenario, strategy).has_value());
  const Counts c = count(scenario, strategy);
  EXPECT_EQ(c.casts_per_layer[0], 0);
  EXPECT_EQ(c.casts_per_layer[3], 0);
  EXPECT_EQ(c.casts_per_layer[1], 8);  // QKV, projection, FC1, FC2: input forward, output gradient backward
  EXPECT_EQ(c.casts_per_layer[2], 8);
  EXPECT_EQ(c.weight_casts, 1);
  EXPECT_EQ(c.fp8_gemms, 2 * 4 * 3);         // two layers, four linears, three passes
  EXPECT_EQ(c.bf16_linear_gemms, 2 * 4 * 3);  // the BF16 edge layers
  // A layer's SP gathers in one micro-batch: QKV's and FC1's inputs forward and again for wgrad, the projection's
  // and FC2's output gradients: 6, in FP8 in the FP8 layers; the output layer's input (twice) and the embedding's
  // output gradient stay 16-bit.
  EXPECT_EQ(c.fp8_gathers, 2 * 6);
  EXPECT_EQ(c.gathers, 4 * 6 + 3);
  // The backward gathers' rows transposed for wgrad (one scale per tensor: TE gathers the rowwise copy alone).
  EXPECT_EQ(c.transposes, 2 * 4);
}

std::string describe(const Op& op) {
  return op_name(op) + " " + to_string(op.kind) + " " + std::to_string(op.bytes) + " " + to_string(op.gemm.inputs) +
         (op.gemm.e5m2 ? " e5m2" : "") + (op.fp8_columnwise ? " columnwise" : "");
}

// Current scaling (its TP amax reductions under SP) and delayed scaling (a pass starting after the amax reduction).
// Block-wise, a weight gradient reads two activations, each scaled per 1x128 block (another cuBLASLt kernel than
// the forward's and the data gradient's 1x128 by a 128x128 weight): its GEMM says so, so that calibration times the
// kernel the executor runs (until 2026-12-02 every block-wise GEMM was fp8_blockwise and timed as the forward's).
TEST(Fp8Lowering, BlockwiseWeightGradientsReadTwoActivationsByTheirBlocks) {
  Fp8Config fp8;
  fp8.recipe = Fp8Recipe::blockwise;
  fp8.format = Fp8Format::e4m3;
  Strategy strategy = testing::make_strategy(1, 1);
  Scenario scenario = fp8_scenario(fp8);
  ASSERT_FALSE(complete_strategy(scenario, strategy).has_value());
  const IterationGraph graph = lower_to_op_graphs(scenario, strategy);
  int passes[3] = {0, 0, 0};
  for (OpIndex i = 0; i < graph.classes.front().size(); ++i) {
    const Op& op = graph.classes.front().op(i);
    if (op.kind != OpKind::gemm || !is_fp8(op.gemm)) continue;
    const bool weight_gradient = op.gemm_pass == GemmPass::weight_gradient;
    EXPECT_EQ(op.gemm.inputs, weight_gradient ? GemmInputs::fp8_blockwise_1d : GemmInputs::fp8_blockwise)
        << op_name(op);
    ++passes[static_cast<int>(op.gemm_pass) - 1];
  }
  for (int count : passes) EXPECT_GT(count, 0);
}

TEST(Fp8Lowering, SameOpsWhetherPassesRepeatOrNot) {
  Fp8Config delayed;
  delayed.recipe = Fp8Recipe::delayed;
  for (const Fp8Config& fp8 : {tensorwise_with_bf16_edges(), delayed}) {
    Strategy strategy = testing::make_strategy(2, 1, 1, true);
    Scenario scenario = fp8_scenario(fp8);
    ASSERT_FALSE(complete_strategy(scenario, strategy).has_value());
    const IterationGraph repeated = lower_to_op_graphs(scenario, strategy);
    lowering::PassRepeatsOff off;
    const IterationGraph emitted = lower_to_op_graphs(scenario, strategy);
    ASSERT_EQ(repeated.classes.front().size(), emitted.classes.front().size());
    for (OpIndex i = 0; i < emitted.classes.front().size(); ++i) {
      const Op& a = repeated.classes.front().op(i);
      const Op& b = emitted.classes.front().op(i);
      EXPECT_EQ(describe(a), describe(b)) << to_string(fp8.recipe) << " " << i;
    }
  }
}

// Current scaling at TP 2 with SP: one 4-byte amax all-reduce over TP before each cast of a tensor SP gathers in FP8
// (QKV's and FC1's inputs forward, the projection's and FC2's output gradients backward), none without SP.
TEST(Fp8Lowering, CurrentScalingReducesTheAmaxOfWhatSpGathers) {
  for (const bool sp : {true, false}) {
    Strategy strategy = testing::make_strategy(2, 1, 1, sp);
    Scenario scenario = fp8_scenario(tensorwise_with_bf16_edges());
    ASSERT_FALSE(complete_strategy(scenario, strategy).has_value());
    const IterationGraph graph = lower_to_op_graphs(scenario, strategy);
    const RankClass& rc = graph.classes.front();
    int reductions = 0;
    for (OpIndex i = 0; i < rc.size(); ++i) {
      const Op& op = rc.op(i);
      if (op.role != OpRole::fp8_amax || op.micro_batch != 0 || op.recomputed) continue;
      ++reductions;
      EXPECT_EQ(op.group, GroupKind::tensor);
      EXPECT_EQ(op.bytes, 4);
      ASSERT_LT(i + 1, rc.size());
      EXPECT_EQ(rc.op(i + 1).kind, OpKind::fp8_cast) << op_name(op);  // the cast whose scale it gives
      EXPECT_EQ(rc.op(i + 1).linear_tensor, op.linear_tensor);
      const bool column = op.linear == OpRole::qkv_projection || op.linear == OpRole::fc1;
      EXPECT_EQ(op.linear_tensor, column ? LinearTensor::input : LinearTensor::output_gradient) << op_name(op);
    }
    EXPECT_EQ(reductions, sp ? 2 * 4 : 0);  // two FP8 layers (the edges stay BF16), four linears
  }
}

// Delayed scaling's amax all-reduce (Transformer Engine's reduce_and_update_fp8_tensors at the forward's autocast exit
// and at the end of the backward): one after every forward and every backward of a micro-batch, over the stage's TP x
// CP x DP GPUs, TE's concatenated amaxes (3 floats a module forward, 2 backward), on the compute stream (TE's blocking
// all-reduce holds it; since 2026-12-06, before on the data-parallel stream, where it queued behind the gradient
// reductions), so the next pass starts after it. None for current scaling, nor on one GPU.
TEST(Fp8Lowering, DelayedScalingReducesAmaxesAfterEachPass) {
  Strategy strategy = testing::make_strategy(2, 1, 1, true);
  Fp8Config delayed;
  delayed.recipe = Fp8Recipe::delayed;
  Scenario scenario = fp8_scenario(delayed);
  ASSERT_FALSE(complete_strategy(scenario, strategy).has_value());
  ASSERT_EQ(strategy.data_parallel_size, 4);
  const IterationGraph graph = lower_to_op_graphs(scenario, strategy);
  const RankClass& rc = graph.classes.front();
  const std::int64_t micro_batches = 16 / 4;
  int forward = 0, backward = 0;
  OpIndex last_reduction = lowering::kNoOp;
  for (OpIndex i = 0; i < rc.size(); ++i) {
    const Op& op = rc.op(i);
    if (op.role != OpRole::fp8_amax) continue;
    EXPECT_EQ(op.kind, OpKind::all_reduce);
    EXPECT_EQ(op.group, GroupKind::amax);
    EXPECT_EQ(op.group_size, 8);
    EXPECT_EQ(op.bytes, 4 * 4 * (op.phase == Phase::forward ? 3 : 2) * 4);  // 4 layers x 4 linears x floats
    EXPECT_EQ(op.stream, Stream::compute) << op_name(op);
    (op.phase == Phase::forward ? forward : backward) += 1;
    // The next pass's compute follows the reduction before it on its stream (the first pass's follows nothing).
    if (last_reduction != lowering::kNoOp) {
      bool follows = false;
      for (OpIndex j = last_reduction + 1; j < i && !follows; ++j) follows = rc.op(j).stream == Stream::compute;
      EXPECT_TRUE(follows) << op_name(op);
    }
    last_reduction = i;
  }
  EXPECT_EQ(forward, micro_batches);
  EXPECT_EQ(backward, micro_batches);

  Scenario tensorwise = fp8_scenario(tensorwise_with_bf16_edges());
  const IterationGraph current = lower_to_op_graphs(tensorwise, strategy);
  for (OpIndex i = 0; i < current.classes.front().size(); ++i)  // only its TP reductions under SP (test below)
    EXPECT_NE(current.classes.front().op(i).group, GroupKind::amax);
  EXPECT_EQ(fp8_amax_reduction_bytes(scenario, testing::make_strategy(1, 1, 1, false), 0, 0, true), 0);  // one GPU
  EXPECT_EQ(fp8_amax_reduction_bytes(scenario, strategy, 0, 0, false), 4 * 4 * 2 * 4);
}

// Under pipeline parallelism a pass's receive is posted ahead: it waits for no op of the stage (only for the receives
// before it on its stream), so its transfer runs beside the stage's compute. The op after it waits for it; the pass's
// compute follows the amax reduction of the pass before through the compute stream's order, which the test above
// holds (the reduction is on that stream). Until 2026-12-07 delayed scaling's
// receive waited for that reduction, which exposed every hop (NeMo 24.07's Llama 2 70B FP8 row: +20.5%, now +9.8%).
TEST(Fp8Lowering, PipelineReceivesWaitForNoAmaxReduction) {
  Fp8Config delayed;
  delayed.recipe = Fp8Recipe::delayed;
  Scenario scenario = fp8_scenario(delayed);
  Strategy strategy = testing::make_strategy(2, 2, 1, true);
  ASSERT_FALSE(complete_strategy(scenario, strategy).has_value());
  const IterationGraph graph = lower_to_op_graphs(scenario, strategy);
  for (const RankClass& rc : graph.classes) {
    int receives = 0, amaxes = 0;
    for (OpIndex i = 0; i < rc.size(); ++i) {
      const Op& op = rc.op(i);
      amaxes += op.role == OpRole::fp8_amax;
      if (op.kind != OpKind::recv) continue;
      ++receives;
      EXPECT_EQ(boost::in_degree(i, rc.graph), 0u) << op_name(op);
      ASSERT_LT(i + 1, rc.size());
      bool waits_for_it = false;  // the op after it (the pass's first) waits for the receive
      for (auto [e, end] = boost::in_edges(i + 1, rc.graph); e != end; ++e)
        waits_for_it |= boost::source(*e, rc.graph) == i;
      EXPECT_TRUE(waits_for_it) << op_name(rc.op(i + 1));
    }
    // Every micro-batch's activation into stage 1 and gradient into stage 0; a forward and a backward reduction each.
    EXPECT_EQ(receives, strategy.num_micro_batches);
    EXPECT_EQ(amaxes, 2 * strategy.num_micro_batches);
  }
}

TEST(Fp8Memory, CopiesParamGatherAndActivations) {
  Strategy strategy = testing::make_strategy(1, 1, 1, false);
  strategy.zero_stage = 1;
  Scenario bf16 = fp8_scenario(Fp8Config{});
  bf16.training.fp8.reset();
  ASSERT_FALSE(complete_strategy(bf16, strategy).has_value());
  Fp8Config plain;
  Fp8Config gathered;
  gathered.param_gather = true;
  const MemoryBreakdown none = estimate_memory(bf16, strategy).per_stage.front();
  const MemoryBreakdown fp8 = estimate_memory(fp8_scenario(plain), strategy).per_stage.front();
  const MemoryBreakdown fp8_gathered = estimate_memory(fp8_scenario(gathered), strategy).per_stage.front();
  const double weights = static_cast<double>(fp8_weights_per_rank(fp8_scenario(plain), strategy, 0).total());
  EXPECT_GT(weights, 0);
  // Both copies (1 byte each) and the per-tensor scales and amax state: a few hundred bytes per module.
  EXPECT_NEAR(static_cast<double>(fp8.parameters - none.parameters), 2 * weights, 4096);
  EXPECT_NEAR(static_cast<double>(fp8_gathered.parameters - none.parameters), 0, 4096);
  EXPECT_LT(fp8.activations, none.activations);  // the weight-gradient inputs kept in FP8
}

// An FP8 layer keeps 1 byte per element of the linears' inputs that only their weight gradients read (QKV's, FC1's,
// FC2's) instead of 2, and beside the bf16 attention output the projection's FP8 copy of it, 1 byte per element.
TEST(Fp8Memory, ALayerKeepsItsWeightGradientInputsAsFp8CopiesAndTheProjectionsBeside) {
  const ModelConfig m = fp8_scenario(Fp8Config{}).model;
  const std::int64_t seq = 2048;
  for (const bool sp : {false, true}) {
    const int tp = sp ? 2 : 1;
    const double bf16 = static_cast<double>(activation_bytes_per_layer(m, seq, 2, tp, sp, 1, Recompute::none));
    const double fp8 =
        static_cast<double>(activation_bytes_per_layer(m, seq, 2, tp, sp, 1, Recompute::none, false, 1, true));
    const double tokens = 2.0 * seq, h = m.hidden_size, ffn = m.ffn_hidden_size;
    const double attention_out = static_cast<double>(m.num_attention_heads) * (h / m.num_attention_heads);
    // QKV's and FC1's inputs are sequence-sharded under SP, FC2's input and the attention output tensor-sharded.
    const double saved_per_token = (2 * h) / (sp ? tp : 1) + ffn / tp;
    EXPECT_NEAR(fp8 - bf16, tokens * (attention_out / tp - saved_per_token), 1) << "sp " << sp;
  }
}

}  // namespace
}  // namespace twin
