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

class AttentionOpDims : public ::testing::TestWithParam<int> {};  // window_attn_skip_freq

TEST_P(AttentionOpDims, CalibrationAndExecutorRunTheWindowTheOpSays) {
  ModelConfig model = testing::llama_shaped(4);
  model.window_size = 700;  // no multiple of any tile
  model.window_attn_skip_freq = GetParam();
  Scenario scenario = testing::make_scenario(model, 1, 2048, 8);
  Strategy strategy = testing::make_strategy(1, 1, 1, false);
  ASSERT_FALSE(complete_strategy(scenario, strategy).has_value());
  const RankClass& rc = lower_to_op_graphs(scenario, strategy).classes.front();
  const lowering::RankShapes shapes = lowering::rank_shapes(scenario, strategy);
  const exec::EqualSequences run{0, shapes.b, shapes.s};
  int windowed = 0, full = 0;
  for (OpIndex i = 0; i < rc.size(); ++i) {
    const Op& op = rc.op(i);
    if (op.kind != OpKind::attention_forward && op.kind != OpKind::attention_backward) continue;
    const kernels::AttentionDims calibration = gpu::attention_dims(op.attention);
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
  }
  EXPECT_GT(windowed, 0);
  EXPECT_EQ(full > 0, GetParam() > 0);  // alternation: every second layer attends fully
}

INSTANTIATE_TEST_SUITE_P(EveryAndAlternatingLayers, AttentionOpDims, ::testing::Values(0, 2));

// A window on a mask that is not causal is no shape the kernels run: refused, never run as full attention.
TEST(AttentionOpDimsOfAShape, AWindowGoesWithTheCausalMask) {
  AttentionShape shape{1, 8, 2, 512, 512, 128, true};
  shape.window = 100;
  EXPECT_EQ(gpu::attention_dims(shape).window, 100);
  shape.causal = false;
  EXPECT_THROW(gpu::attention_dims(shape), std::logic_error);
  shape.window = 0;
  EXPECT_EQ(gpu::attention_dims(shape).window, 0);
}

}  // namespace
}  // namespace twin::test
