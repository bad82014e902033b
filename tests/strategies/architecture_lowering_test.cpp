// The architectures of 2025-26 in the lowering: windowed layers' attention priced over the window (and full ones
// not), shared experts, QK-norm and post norms as ops of their own, first dense layers with a dense MLP, and MFU's
// FLOPs alike.
#include <gtest/gtest.h>

#include "cost/profile.hpp"
#include "strategies/flops.hpp"
#include "strategies/lowering.hpp"
#include "strategies/memory.hpp"
#include "strategies/validity.hpp"
#include "strategy_fixtures.hpp"

namespace twin {
namespace {

IterationGraph lowered(const Scenario& scenario) {
  Strategy st = testing::make_strategy(1, 1, 1, false);
  st.micro_batch_size = 1;
  EXPECT_EQ(complete_strategy(scenario, st), std::nullopt);
  EXPECT_EQ(invalid_reason(scenario, st), std::nullopt);
  return lower_to_op_graphs(scenario, st);
}

// The forward attention ops' FLOPs by layer.
std::vector<double> attention_flops(const IterationGraph& g) {
  std::vector<double> flops;
  const RankClass& rc = g.classes.front();
  for (OpIndex i = 0; i < rc.size(); ++i)
    if (rc.op(i).kind == OpKind::attention_forward && rc.op(i).micro_batch == 0 && !rc.op(i).recomputed)
      flops.push_back(rc.op(i).flops);
  return flops;
}

int count(const IterationGraph& g, OpRole role) {
  int n = 0;
  const RankClass& rc = g.classes.front();
  for (OpIndex i = 0; i < rc.size(); ++i) n += rc.op(i).role == role && rc.op(i).micro_batch == 0 ? 1 : 0;
  return n;
}

TEST(ArchitectureLowering, WindowedLayersAttendOverTheirWindowFullOnesOverTheSequence) {
  ModelConfig m = testing::llama_shaped(4);
  Scenario full = testing::make_scenario(m, 1, 4096, 8);
  m.window_size = 1024;
  m.window_attn_skip_freq = 2;  // layers 0 and 2 windowed, 1 and 3 full
  Scenario windowed = testing::make_scenario(m, 1, 4096, 8);
  const std::vector<double> before = attention_flops(lowered(full)), after = attention_flops(lowered(windowed));
  ASSERT_EQ(after.size(), 4u);
  // Keys kept: a window of 1024 over 4096 queries keeps (1024^2/2 + 1024 x 3072) of 4096^2 / 2 causal ones.
  const double share = (1024.0 * 1024 / 2 + 1024.0 * 3072) / (4096.0 * 4096 / 2);
  EXPECT_NEAR(after[0] / before[0], share, 1e-12);
  EXPECT_DOUBLE_EQ(after[1], before[1]);
  EXPECT_NEAR(after[2] / before[2], share, 1e-12);
  EXPECT_LT(model_flops_per_iteration(windowed), model_flops_per_iteration(full));
}

// A window of at least the sequence cuts no key: its ops are the causal ones, kernel key and price alike (the kernel
// gpu::Attention runs for it is the causal one; before 2026-11-29 its key said the window and the profile's causal
// entries did not price it).
TEST(ArchitectureLowering, AWindowOfTheWholeSequenceIsCausalAttention) {
  ModelConfig m = testing::llama_shaped(2);
  const IterationGraph causal = lowered(testing::make_scenario(m, 1, 4096, 8));
  for (std::int64_t window : {4096, 10000}) {
    m.window_size = window;
    const IterationGraph whole = lowered(testing::make_scenario(m, 1, 4096, 8));
    const RankClass &a = causal.classes.front(), &b = whole.classes.front();
    ASSERT_EQ(a.size(), b.size());
    for (OpIndex i = 0; i < a.size(); ++i) {
      EXPECT_EQ(b.op(i).attention.window, 0) << op_name(b.op(i));
      EXPECT_EQ(a.op(i).flops, b.op(i).flops) << op_name(b.op(i));
      if (b.op(i).kind == OpKind::attention_forward || b.op(i).kind == OpKind::attention_backward)
        EXPECT_EQ(kernel_shape_key(a.op(i)), kernel_shape_key(b.op(i)));
    }
  }
}

TEST(ArchitectureLowering, SharedExpertsAndQkNormAreOpsOfTheirOwn) {
  ModelConfig m = testing::moe_shaped();
  m.qk_layernorm = true;
  m.moe.shared_expert_ffn_hidden_size = 2048;
  m.moe.first_dense_layers = 1;
  const IterationGraph g = lowered(testing::make_scenario(m, 1, 2048, 8));
  // Forward and backward of each of the 3 MoE layers; the dense first layer has fc1 instead.
  EXPECT_EQ(count(g, OpRole::shared_expert_fc1), 3 * 3);  // forward, input and weight gradients
  EXPECT_EQ(count(g, OpRole::shared_expert_activation), 3 * 2);
  EXPECT_EQ(count(g, OpRole::fc1), 1 * 3);
  EXPECT_EQ(count(g, OpRole::qk_norm), 4 * 2);
  const RankClass& rc = g.classes.front();
  for (OpIndex i = 0; i < rc.size(); ++i) {
    if (rc.op(i).role == OpRole::shared_expert_fc1 && rc.op(i).gemm_pass == GemmPass::forward) {
      EXPECT_EQ(rc.op(i).gemm.n, 2 * 2048);  // SwiGLU's gate and up
    }
  }
}

// Post norms (Gemma-2 and 3): one norm more after each branch, forward and backward; the residual adds are not fused
// into the branch's GEMM (the norm sits between them); each keeps its input for its backward.
TEST(ArchitectureLowering, PostNormsAreNormsOfTheirOwnBeforeEachResidual) {
  ModelConfig m = testing::llama_shaped(4);
  Scenario plain = testing::make_scenario(m, 1, 4096, 8);
  plain.framework.residual_fusion = true;
  m.post_norms = true;
  Scenario post = testing::make_scenario(m, 1, 4096, 8);
  post.framework.residual_fusion = true;
  const IterationGraph g = lowered(post), before = lowered(plain);
  EXPECT_EQ(count(g, OpRole::post_attention_norm), 4 * 2);
  EXPECT_EQ(count(g, OpRole::post_mlp_norm), 4 * 2);
  EXPECT_EQ(count(before, OpRole::post_attention_norm), 0);
  EXPECT_EQ(count(g, OpRole::input_norm), count(before, OpRole::input_norm));
  EXPECT_EQ(count(g, OpRole::attention_residual), 4 * 2);  // the adds and their gradients' skip path, unfused
  EXPECT_EQ(count(before, OpRole::attention_residual), 0);  // the projection's epilogue, the norm's backward
  const RankClass& rc = g.classes.front();
  for (OpIndex i = 0; i < rc.size(); ++i) EXPECT_FALSE(rc.op(i).fuses_residual) << to_string(rc.op(i).role);
  // Two more hidden-wide 16-bit inputs kept a layer: 2 x 2 bytes x tokens x hidden (TP 1, one sample).
  const double tokens = 4096, hidden = m.hidden_size;
  EXPECT_EQ(activation_bytes_per_layer(post.model, 4096, 1, 1, false, 1, Recompute::none) -
                activation_bytes_per_layer(plain.model, 4096, 1, 1, false, 1, Recompute::none),
            static_cast<Bytes>(2 * 2 * tokens * hidden));
}

}  // namespace
}  // namespace twin
