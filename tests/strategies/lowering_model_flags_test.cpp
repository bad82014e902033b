// The lowering carries the model's kernel choices onto every op, so that the cost model prices an
// unfused GPT attention and a GeLU MLP as such, not as the flash/SwiGLU defaults.
#include <gtest/gtest.h>

#include "strategies/lowering.hpp"
#include "strategies/validity.hpp"
#include "strategy_fixtures.hpp"

namespace twin {
namespace {

void expect_flags(const ModelConfig& model, bool flash, bool gated) {
  Scenario scenario = testing::make_scenario(model, 1, 2048, 8);
  Strategy strategy = testing::make_strategy(2, 1);
  ASSERT_FALSE(complete_strategy(scenario, strategy).has_value());
  IterationGraph graph = lower_to_op_graphs(scenario, strategy);
  int attention = 0, activation = 0;
  for (const RankClass& rc : graph.classes)
    for (OpIndex i = 0; i < rc.size(); ++i) {
      const Op& op = rc.op(i);
      if (op.kind == OpKind::attention_forward || op.kind == OpKind::attention_backward) {
        ++attention;
        EXPECT_EQ(op.attention.flash, flash) << op_name(op);
      }
      if (op.kind == OpKind::activation_forward || op.kind == OpKind::activation_backward) {
        ++activation;
        EXPECT_EQ(op.gated_activation, gated) << op_name(op);
      }
    }
  EXPECT_GT(attention, 0);
  EXPECT_GT(activation, 0);
}

TEST(LoweringModelFlags, GptIsUnfusedGelu) { expect_flags(testing::gpt_shaped(), false, false); }
TEST(LoweringModelFlags, LlamaIsFlashSwiglu) { expect_flags(testing::llama_shaped(), true, true); }

}  // namespace
}  // namespace twin
