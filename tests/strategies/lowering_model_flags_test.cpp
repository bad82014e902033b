// The lowering carries the model's kernel choices onto every op, so that the cost model prices an
// unfused GPT attention and a GeLU MLP as such, not as the flash/SwiGLU defaults; every activation op names the
// model's activation and every loss op whether the logits are soft-capped (the kernel the executor runs).
#include <gtest/gtest.h>

#include "strategies/lowering.hpp"
#include "strategies/validity.hpp"
#include "strategy_fixtures.hpp"

namespace twin {
namespace {

void expect_flags(const ModelConfig& model, bool flash, Activation activation) {
  Scenario scenario = testing::make_scenario(model, 1, 2048, 8);
  Strategy strategy = testing::make_strategy(2, 1);
  ASSERT_FALSE(complete_strategy(scenario, strategy).has_value());
  IterationGraph graph = lower_to_op_graphs(scenario, strategy);
  int attention = 0, activations = 0, losses = 0;
  for (const RankClass& rc : graph.classes)
    for (OpIndex i = 0; i < rc.size(); ++i) {
      const Op& op = rc.op(i);
      if (op.kind == OpKind::attention_forward || op.kind == OpKind::attention_backward) {
        ++attention;
        EXPECT_EQ(op.attention.flash, flash) << op_name(op);
      }
      if (op.kind == OpKind::activation_forward || op.kind == OpKind::activation_backward) {
        ++activations;
        EXPECT_EQ(op.activation, activation) << op_name(op);
      }
      if (op.kind == OpKind::loss_forward || op.kind == OpKind::loss_backward) ++losses;
      EXPECT_EQ(op.softcapped_logits, (op.kind == OpKind::loss_forward || op.kind == OpKind::loss_backward) &&
                                          model.final_logit_softcap > 0)
          << op_name(op);
    }
  EXPECT_GT(attention, 0);
  EXPECT_GT(activations, 0);
  EXPECT_GT(losses, 0);
}

TEST(LoweringModelFlags, GptIsUnfusedGelu) { expect_flags(testing::gpt_shaped(), false, Activation::gelu); }
TEST(LoweringModelFlags, LlamaIsFlashSwiglu) { expect_flags(testing::llama_shaped(), true, Activation::swiglu); }

TEST(LoweringModelFlags, GemmaIsGegluWithCappedLogits) {
  ModelConfig gemma = testing::llama_shaped();
  gemma.activation = Activation::geglu;
  gemma.final_logit_softcap = 30;
  expect_flags(gemma, true, Activation::geglu);
}

TEST(LoweringModelFlags, NemotronIsSquaredRelu) {
  ModelConfig nemotron = testing::gpt_shaped();
  nemotron.activation = Activation::squared_relu;
  expect_flags(nemotron, false, Activation::squared_relu);
}

}  // namespace
}  // namespace twin
