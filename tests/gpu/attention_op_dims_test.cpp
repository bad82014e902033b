// One path from an attention op to its kernel: calibration's bench (gpu::attention_dims, what
// calibrate/gpu/kernel_benches.cpp times) and the executor (exec::run_attention_dims, what a dense layer launches)
// give the kernel the same heads, head dim, mask and window for every attention op the lowering emits, and the
// window is the op's: a windowed layer's (core/model.hpp is_windowed_layer) its window_size, an alternating model's
// full layers none. Before 2026-11-29 the bench timed every windowed key as causal. Builds the dimensions only: no
// GPU needed.
#include <gtest/gtest.h>

#include "executor/gpu/dense_block.hpp"
#include "gpu/op_kernels.hpp"
#include "strategies/lowering.hpp"
#include "strategies/validity.hpp"
#include "tests/strategies/strategy_fixtures.hpp"

namespace twin::test {
namespace {

// Each attention op of `model` lowered on one GPU at sequence `seq`, with the rank's shapes and one run of its whole
// rows: visit(op, shapes, run).
template <typename Visit>
void for_each_attention_op(const ModelConfig& model, std::int64_t seq, Visit visit) {
  const Scenario scenario = testing::make_scenario(model, 1, seq, 8);
  Strategy strategy = testing::make_strategy(1, 1, 1, false);
  ASSERT_FALSE(complete_strategy(scenario, strategy).has_value());
  const IterationGraph graph = lower_to_op_graphs(scenario, strategy);
  const RankClass& rc = graph.classes.front();
  const lowering::RankShapes shapes = lowering::rank_shapes(scenario, strategy);
  const exec::EqualSequences run{0, shapes.b, shapes.s};
  for (OpIndex i = 0; i < rc.size(); ++i)
    if (rc.op(i).kind == OpKind::attention_forward || rc.op(i).kind == OpKind::attention_backward)
      visit(rc.op(i), shapes, run);
}

class AttentionOpDims : public ::testing::TestWithParam<int> {};  // window_attn_skip_freq

TEST_P(AttentionOpDims, CalibrationAndExecutorRunTheWindowTheOpSays) {
  ModelConfig model = testing::llama_shaped(4);
  model.window_size = 700;  // no multiple of any tile
  model.window_attn_skip_freq = GetParam();
  int windowed = 0, full = 0;
  for_each_attention_op(model, 2048, [&](const Op& op, const lowering::RankShapes& shapes,
                                         const exec::EqualSequences& run) {
    const kernels::AttentionDims calibration = gpu::attention_dims(op.attention, model.attention_softcap);
    const kernels::AttentionDims executor = exec::run_attention_dims(op, shapes, run);
    const std::int64_t expected = model.is_windowed_layer(op.layer) ? model.window_size : 0;
    EXPECT_EQ(calibration.window, expected) << op_name(op);
    EXPECT_EQ(executor.window, expected) << op_name(op);
    EXPECT_EQ(calibration.batch, executor.batch) << op_name(op);
    EXPECT_EQ(calibration.seq, executor.seq) << op_name(op);
    EXPECT_EQ(calibration.heads, executor.heads) << op_name(op);
    EXPECT_EQ(calibration.kv_heads, executor.kv_heads) << op_name(op);
    EXPECT_EQ(calibration.head_dim, executor.head_dim) << op_name(op);
    EXPECT_EQ(calibration.v_head_dim, executor.v_head_dim) << op_name(op);
    EXPECT_TRUE(calibration.causal && executor.causal) << op_name(op);
    (expected > 0 ? windowed : full) += 1;
  });
  EXPECT_GT(windowed, 0);
  EXPECT_EQ(full > 0, GetParam() > 0);  // alternation: every second layer attends fully
}

INSTANTIATE_TEST_SUITE_P(EveryAndAlternatingLayers, AttentionOpDims, ::testing::Values(0, 2));

// A window on a mask that is not causal is no shape the kernels run: refused, never run as full attention.
TEST(AttentionOpDimsOfAShape, AWindowGoesWithTheCausalMask) {
  AttentionShape shape{1, 8, 2, 512, 512, 128, true};
  shape.window = 100;
  EXPECT_EQ(gpu::attention_dims(shape, 0).window, 100);
  shape.causal = false;
  EXPECT_THROW(gpu::attention_dims(shape, 0), std::logic_error);
  shape.window = 0;
  EXPECT_EQ(gpu::attention_dims(shape, 0).window, 0);
}

// A soft-capped model's attention ops say so, and calibration's bench (given the model's cap, as
// calibrate/gpu/kernel_calibration.cpp's facts) and the executor run every one at the model's cap; a model without a
// cap runs none, and an op that says capped without a cap is refused rather than run uncapped.
TEST(AttentionOpDimsOfAShape, TheCapIsTheModelsWhereTheOpSaysCapped) {
  for (double cap : {0.0, 50.0}) {
    ModelConfig model = testing::llama_shaped(2);
    model.attention_softcap = cap;
    int attention = 0;
    for_each_attention_op(model, 1024, [&](const Op& op, const lowering::RankShapes& shapes,
                                           const exec::EqualSequences& run) {
      ++attention;
      EXPECT_EQ(op.attention.softcapped, cap > 0) << op_name(op);
      EXPECT_FLOAT_EQ(gpu::attention_dims(op.attention, cap).softcap, cap) << op_name(op);
      EXPECT_FLOAT_EQ(exec::run_attention_dims(op, shapes, run).softcap, cap) << op_name(op);
    });
    EXPECT_GT(attention, 0);
  }
  AttentionShape capped{1, 8, 2, 512, 512, 128, true};
  capped.softcapped = true;
  EXPECT_THROW(gpu::attention_dims(capped, 0), std::logic_error);
}

// Sinks are the model's: every attention op of a model with them says so, none of a model without.
TEST(AttentionOpDimsOfAShape, EveryAttentionOpOfAModelWithSinksSaysSo) {
  for (bool sinks : {false, true}) {
    ModelConfig model = testing::llama_shaped(2);
    model.attention_sinks = sinks;
    int attention = 0;
    for_each_attention_op(model, 1024, [&](const Op& op, const lowering::RankShapes&, const exec::EqualSequences&) {
      ++attention;
      EXPECT_EQ(op.attention.sinks, sinks) << op_name(op);
    });
    EXPECT_GT(attention, 0);
    EXPECT_EQ(attention % (2 * 2), 0) << "a forward and a backward per layer and micro-batch";
  }
}

}  // namespace
}  // namespace twin::test
