// The 2025-26 shapes twin execute runs on the CPU side: Qwen3's QK-norm weights and DeepSeek-V3's shared experts and
// dense first layer in the parameter layout, and their ops bound to the actions that run them (QK-norm's norm ops
// to the norm actions, the shared experts' GEMMs and activation to the dense MLP's), gpt-oss's attention sinks bound
// to the layer's weight.
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "executor/op_binding.hpp"
#include "executor/parameters.hpp"
#include "strategies/lowering.hpp"
#include "strategies/validity.hpp"
#include "../strategies/strategy_fixtures.hpp"

namespace twin::exec {
namespace {

// A 4-layer MoE model on one GPU with QK-norm (Qwen3-MoE's 128 experts, top-8) or with a dense first layer and a
// shared expert (DeepSeek-V3's shape).
Scenario qwen3_moe() {
  ModelConfig m = testing::moe_shaped();
  m.qk_layernorm = true;
  m.moe.num_experts = 128;
  m.moe.top_k = 8;
  m.moe.ffn_hidden_size = 192;
  Scenario s = testing::make_scenario(m, 1, 1024, 16);
  s.cluster.node_groups[0].gpus_per_node = 1;
  return s;
}
Scenario deepseek_shaped() {
  ModelConfig m = testing::moe_shaped();
  m.moe.num_experts = 64;
  m.moe.top_k = 8;
  m.moe.ffn_hidden_size = 256;
  m.moe.shared_expert_ffn_hidden_size = 256;
  m.moe.first_dense_layers = 1;
  Scenario s = testing::make_scenario(m, 1, 1024, 16);
  s.cluster.node_groups[0].gpus_per_node = 1;
  s.framework.residual_fusion = true;  // the dense layers' FC2 adds the stream in its epilogue; the shared FC2 must not
  return s;
}

Strategy one_gpu(const Scenario& scenario) {
  Strategy s = testing::make_strategy(1, 1, 1, false);
  if (auto reason = complete_strategy(scenario, s)) throw std::runtime_error(*reason);
  return s;
}

std::vector<std::string> names(const ParameterUnitLayout& unit) {
  std::vector<std::string> out;
  for (const WeightTensor& w : unit.tensors) out.push_back(w.name);
  return out;
}

TEST(MoeShapesLayout, QkNormIsTwoHeadWideRowsOfOnesAfterQkv) {
  const Scenario scenario = qwen3_moe();
  const Strategy strategy = one_gpu(scenario);
  const auto units = plan_parameter_units(scenario, strategy, placement_of(strategy, 0), 7);
  const auto layer = std::find_if(units.begin(), units.end(), [](const auto& u) { return u.id == 0; });
  ASSERT_NE(layer, units.end());
  EXPECT_EQ(names(*layer), (std::vector<std::string>{"L0.input_norm", "L0.qkv", "L0.qk_norm", "L0.proj",
                                                     "L0.mlp_norm", "L0.router"}));
  const WeightTensor& qk = layer->tensor(OpRole::qk_norm);
  EXPECT_EQ(qk.rows, 2);  // q_norm, then k_norm
  EXPECT_EQ(qk.cols, scenario.model.kv_channels);
  EXPECT_EQ(qk.init_stddev, 0.0f);  // ones, as every norm weight starts
  EXPECT_TRUE(qk.tp_replicated);
  EXPECT_TRUE(qk.tp_partial_gradient);  // each TP rank's heads add to it: summed over TP with or without SP
  EXPECT_FALSE(layer->tensor(OpRole::input_norm).tp_partial_gradient);  // whole on each rank without SP
}

TEST(MoeShapesLayout, DenseFirstLayerThenSharedExpertsBesideTheRouted) {
  const Scenario scenario = deepseek_shaped();
  const Strategy strategy = one_gpu(scenario);
  const auto units = plan_parameter_units(scenario, strategy, placement_of(strategy, 0), 7);
  const auto unit = [&](std::int32_t id) { return *std::find_if(units.begin(), units.end(), [&](const auto& u) { return u.id == id; }); };
  EXPECT_EQ(names(unit(0)), (std::vector<std::string>{"L0.input_norm", "L0.qkv", "L0.proj", "L0.mlp_norm", "L0.fc1",
                                                      "L0.fc2"}));
  EXPECT_EQ(std::count_if(units.begin(), units.end(), [](const auto& u) { return u.id == expert_unit_of(0); }), 0);
  EXPECT_EQ(names(unit(1)), (std::vector<std::string>{"L1.input_norm", "L1.qkv", "L1.proj", "L1.mlp_norm",
                                                      "L1.router", "L1.shared_fc1", "L1.shared_fc2"}));
  const std::int64_t h = scenario.model.hidden_size, shared = scenario.model.moe.shared_expert_ffn_hidden_size;
  EXPECT_EQ(unit(1).tensor(OpRole::shared_expert_fc1).elements(), h * 2 * shared);  // SwiGLU: gate and up
  EXPECT_EQ(unit(1).tensor(OpRole::shared_expert_fc2).elements(), shared * h);
  EXPECT_EQ(unit(expert_unit_of(1)).tensor(OpRole::expert_fc1).rows, 64 * h);
}

// Each op of the graph binds; QK-norm's norms name their weight, the shared experts' linears and activation run as
// the dense MLP's, once forward and once backward per micro-batch and MoE layer.
TEST(MoeShapesBinding, QkNormAndSharedExpertOpsBindToDenseActions) {
  for (const Scenario& scenario : {qwen3_moe(), deepseek_shaped()}) {
    const IterationGraph graph = lower_to_op_graphs(scenario, one_gpu(scenario));
    ASSERT_EQ(graph.classes.size(), 1u);
    const RankClass& rc = graph.classes.front();
    const std::vector<OpBinding> bindings = bind_ops(rc, false);
    int qk_norms = 0, shared_linears = 0, shared_activations = 0;
    for (OpIndex i = 0; i < rc.size(); ++i) {
      const Op& op = rc.op(i);
      if (op.role == OpRole::qk_norm) {
        ++qk_norms;
        EXPECT_EQ(bindings[i].subject, OpRole::qk_norm);
        EXPECT_TRUE(bindings[i].action == Action::norm_forward || bindings[i].action == Action::norm_backward);
      }
      if (op.role == OpRole::shared_expert_fc1 || op.role == OpRole::shared_expert_fc2) {
        ++shared_linears;
        EXPECT_EQ(bindings[i].subject, op.role);
        EXPECT_TRUE(bindings[i].action == Action::linear_forward || bindings[i].action == Action::linear_input_grad ||
                    bindings[i].action == Action::linear_weight_grad);
        EXPECT_FALSE(op.fuses_residual) << "the combine adds to the shared experts' output after their FC2";
      }
      if (op.role == OpRole::shared_expert_activation) {
        ++shared_activations;
        EXPECT_TRUE(bindings[i].action == Action::activation_forward ||
                    bindings[i].action == Action::activation_backward);
      }
    }
    const int micro_batches = one_gpu(scenario).num_micro_batches, layers = scenario.model.num_layers;
    EXPECT_EQ(qk_norms, scenario.model.qk_layernorm ? 2 * micro_batches * layers : 0);
    const int moe_layers = layers - scenario.model.moe.first_dense_layers;
    const bool shared = scenario.model.moe.shared_expert_ffn_hidden_size > 0;
    EXPECT_EQ(shared_linears, shared ? 6 * micro_batches * moe_layers : 0);  // two linears, three GEMMs each
    EXPECT_EQ(shared_activations, shared ? 2 * micro_batches * moe_layers : 0);
  }
}

// gpt-oss's sinks: each attention op says it has them and binds to the layer's sinks (core_attention); the first
// attention backward of each layer in an iteration stores their gradient, the later micro-batches' add to it.
TEST(MoeShapesBinding, AttentionWithSinksWritesTheSinksGradientOncePerLayerFirst) {
  ModelConfig m = testing::llama_shaped(4);
  m.attention_sinks = true;
  Scenario scenario = testing::make_scenario(m, 1, 1024, 4);
  scenario.cluster.node_groups[0].gpus_per_node = 1;
  const IterationGraph graph = lower_to_op_graphs(scenario, one_gpu(scenario));
  const RankClass& rc = graph.classes.front();
  const std::vector<OpBinding> bindings = bind_ops(rc, false);
  std::map<std::int32_t, int> backwards, firsts;
  for (OpIndex i = 0; i < rc.size(); ++i) {
    const Op& op = rc.op(i);
    if (op.kind != OpKind::attention_forward && op.kind != OpKind::attention_backward) continue;
    EXPECT_TRUE(op.attention.sinks);
    EXPECT_EQ(bindings[i].subject, OpRole::core_attention);
    const std::optional<GradientKey> key = gradient_key(op, bindings[i], false);
    EXPECT_EQ(key.has_value(), op.kind == OpKind::attention_backward);
    if (op.kind != OpKind::attention_backward) continue;
    ++backwards[op.layer];
    if (bindings[i].first_gradient) ++firsts[op.layer];
  }
  ASSERT_EQ(backwards.size(), 4u);
  for (const auto& [layer, count] : backwards) {
    EXPECT_EQ(count, 4) << "layer " << layer;  // one per micro-batch
    EXPECT_EQ(firsts[layer], 1) << "layer " << layer;
  }
}

}  // namespace
}  // namespace twin::exec
