// Dropout as the ops state it (issue 42): each residual add says its rows, columns and hidden-dropout probability and
// counts the 1-byte mask in its bytes (written forward, read backward beside the branch's gradient it writes); the
// embedding's ops say the hidden dropout of its output and are priced with the mask; attention ops say their
// attention-dropout probability. Without dropout the residual moves three bf16 tensors and prices as before.
#include <functional>

#include <gtest/gtest.h>

#include "cost/profile.hpp"
#include "strategies/lowering.hpp"
#include "strategies/validity.hpp"
#include "strategy_fixtures.hpp"

namespace twin {
namespace {

IterationGraph lower_dropout_model(Scenario scenario, const Strategy& strategy_in) {
  Strategy strategy = strategy_in;
  scenario.cluster.node_groups[0].gpu = *gpu_preset("H100-SXM-80GB");
  EXPECT_EQ(complete_strategy(scenario, strategy), std::nullopt);
  EXPECT_EQ(invalid_reason(scenario, strategy), std::nullopt) << strategy.key();
  IterationGraph graph = lower_to_op_graphs(scenario, strategy);
  check_well_formed(graph);
  return graph;
}

void each_op(const IterationGraph& g, const std::function<void(const Op&)>& f) {
  for (const RankClass& rc : g.classes)
    for (OpIndex i = 0; i < rc.size(); ++i) f(rc.op(i));
}

bool is_residual(const Op& op) {
  return op.kind == OpKind::elementwise && (op.role == OpRole::attention_residual || op.role == OpRole::mlp_residual);
}

// GPT with hidden dropout 0.1 and attention dropout 0.1 (flash), at TP 2 with SP: rows are tokens / 2, columns h.
TEST(DropoutLowering, ResidualAndEmbeddingOpsStateTheirDropoutAndCountTheMask) {
  Scenario scenario = testing::make_scenario(testing::gpt_shaped(), 1, 2048, 8);
  scenario.model.attention_backend = AttentionBackend::flash;
  const IterationGraph graph = lower_dropout_model(scenario, testing::make_strategy(2, 1));
  const std::int64_t h = scenario.model.hidden_size;
  int residuals = 0, embeddings = 0, attentions = 0;
  each_op(graph, [&](const Op& op) {
    if (is_residual(op)) {
      ++residuals;
      EXPECT_EQ(op.cols, h);
      EXPECT_EQ(op.rows, 2048 / 2);  // one sequence of the micro-batch, SP over TP 2
      EXPECT_FLOAT_EQ(op.dropout, 0.1f);
      const std::int64_t elements = op.rows * op.cols;
      EXPECT_EQ(op.bytes, (op.phase == Phase::forward ? 7 : 11) * elements) << op_name(op);
      EXPECT_NE(kernel_shape_key(op).find(",dropout=1"), std::string::npos);
    }
    if (op.kind == OpKind::embedding_forward || op.kind == OpKind::embedding_backward) {
      ++embeddings;
      EXPECT_FLOAT_EQ(op.dropout, 0.1f);
      Op plain = op;
      plain.dropout = 0;
      EXPECT_DOUBLE_EQ(memory_bound_bytes(op) - memory_bound_bytes(plain), 5.0 * op.rows * op.cols);
      EXPECT_NE(kernel_shape_key(op).find(",dropout=1"), std::string::npos);
      EXPECT_EQ(kernel_shape_key(plain).find(",dropout"), std::string::npos);
    }
    if (op.kind == OpKind::attention_forward || op.kind == OpKind::attention_backward) {
      ++attentions;
      EXPECT_FLOAT_EQ(op.dropout, 0.1f);
    }
  });
  EXPECT_GT(residuals, 0);
  EXPECT_GT(embeddings, 0);
  EXPECT_GT(attentions, 0);
}

// Without dropout the residual keeps its bytes of before (two reads and one write of bf16) and key; it now states
// its rows and columns too, and no op states a dropout.
TEST(DropoutLowering, WithoutDropoutTheResidualMovesThreeTensorsAndStatesItsShape) {
  Scenario scenario = testing::make_scenario(testing::gpt_shaped(), 1, 2048, 8);
  scenario.model.hidden_dropout = scenario.model.attention_dropout = 0;
  scenario.framework.residual_fusion = false;
  const IterationGraph graph = lower_dropout_model(scenario, testing::make_strategy(2, 1, 1, false));
  int residuals = 0;
  each_op(graph, [&](const Op& op) {
    EXPECT_EQ(op.dropout, 0.f) << op_name(op);
    if (!is_residual(op)) return;
    ++residuals;
    EXPECT_EQ(op.rows, 2048);  // no SP: every token on each TP rank
    EXPECT_EQ(op.cols, scenario.model.hidden_size);
    EXPECT_EQ(op.bytes, 6 * op.rows * op.cols);
    EXPECT_EQ(kernel_shape_key(op), "elementwise:bytes=" + std::to_string(op.bytes));
  });
  EXPECT_GT(residuals, 0);
}

// The dropout's mask and the branch's gradient cost time: the same plan with dropout is priced slower.
TEST(DropoutLowering, DropoutPricesTheMaskTraffic) {
  Op forward;
  forward.kind = OpKind::elementwise;
  forward.role = OpRole::mlp_residual;
  forward.rows = 4096;
  forward.cols = 4096;
  forward.bytes = 6 * forward.rows * forward.cols;
  Op dropped = forward;
  dropped.dropout = 0.1f;
  dropped.bytes = 7 * forward.rows * forward.cols;
  const GpuSpec h100 = *gpu_preset("H100-SXM-80GB");
  EXPECT_GT(compute_time_ns(builtin_profile(), h100, dropped), compute_time_ns(builtin_profile(), h100, forward));
}

}  // namespace
}  // namespace twin
