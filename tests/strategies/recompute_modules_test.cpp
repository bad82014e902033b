// Selective recompute's modules (Megatron's --recompute-modules, core/strategy.hpp): for each module, the bytes the
// memory model no longer keeps, derived here from the tensors' shapes (not from the layer description), and the
// forward ops the lowering repeats in the backward (marked recomputed). Each test fails if its module is ignored.
#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/hf_config.hpp"
#include "strategies/lowering.hpp"
#include "strategies/memory.hpp"
#include "strategies/validity.hpp"
#include "strategy_fixtures.hpp"
#include "tests/core/hf_fixtures.hpp"

namespace twin {
namespace {

using enum RecomputeModule;
constexpr std::int64_t kSeq = 2048;

RecomputeModuleMask mask(std::initializer_list<RecomputeModule> modules) {
  RecomputeModuleMask out;
  for (RecomputeModule m : modules) out |= module_bit(m);
  return out;
}

// One layer's saved bytes at TP 1, one sequence of kSeq tokens, under selective recompute of `modules`.
double layer_bytes(const ModelConfig& m, RecomputeModuleMask modules, bool moe_layer, std::int64_t seq = kSeq) {
  return static_cast<double>(
      activation_bytes_per_layer(m, seq, 1, 1, false, 1, Recompute::selective, moe_layer, 1, false, modules));
}
double unrecomputed_bytes(const ModelConfig& m, bool moe_layer, std::int64_t seq = kSeq) {
  return static_cast<double>(activation_bytes_per_layer(m, seq, 1, 1, false, 1, Recompute::none, moe_layer, 1));
}

ModelConfig with_shared_experts() {
  ModelConfig m = testing::moe_shaped();
  m.moe.shared_expert_ffn_hidden_size = 512;
  return m;
}

ModelConfig deepseek_v3(int layers) {
  nlohmann::json config = testing::hf_fixture("deepseek-v3-config.json");
  config["num_nextn_predict_layers"] = 0;
  ModelConfig m = model_from_hf_config(config, "deepseek-v3-config.json");
  m.num_layers = layers;
  return m;
}

TEST(RecomputeModulesMemory, CoreAttentionOnlyWhereStated) {
  const ModelConfig m = testing::llama_shaped();
  // Megatron's default list is core_attn: the stated list replaces it, so without core_attn the attention's fp32
  // log-sum-exp (heads x tokens x 4 bytes) is kept as without recompute.
  const double lse = 4.0 * kSeq * m.num_attention_heads;
  EXPECT_DOUBLE_EQ(layer_bytes(m, mask({core_attn}), false), unrecomputed_bytes(m, false) - lse);
  EXPECT_DOUBLE_EQ(layer_bytes(m, mask({layernorm}), false), layer_bytes(m, mask({core_attn, layernorm}), false) + lse);
}

TEST(RecomputeModulesMemory, LayernormDropsBothNormsOutputs) {
  const ModelConfig m = testing::llama_shaped();
  const double norm_output = 2.0 * kSeq * m.hidden_size;  // bf16, the QKV's input and FC1's
  EXPECT_DOUBLE_EQ(layer_bytes(m, mask({layernorm}), false), unrecomputed_bytes(m, false) - 2 * norm_output);
  // In an MoE layer the second is the router's input.
  const ModelConfig moe = testing::moe_shaped();
  EXPECT_DOUBLE_EQ(layer_bytes(moe, mask({layernorm}), true), unrecomputed_bytes(moe, true) - 2 * norm_output);
}

TEST(RecomputeModulesMemory, MlpKeepsADenseMlpsInputOnly) {
  const ModelConfig m = testing::llama_shaped();
  const double fc1_out = 2.0 * kSeq * 2 * m.ffn_hidden_size, fc2_in = 2.0 * kSeq * m.ffn_hidden_size;  // SwiGLU
  EXPECT_DOUBLE_EQ(layer_bytes(m, mask({mlp}), false), unrecomputed_bytes(m, false) - fc1_out - fc2_in);
  const ModelConfig moe = testing::moe_shaped();  // Megatron recomputes no MoE layer's MLP under `mlp`
  EXPECT_DOUBLE_EQ(layer_bytes(moe, mask({mlp}), true), unrecomputed_bytes(moe, true));
}

TEST(RecomputeModulesMemory, MoeActDropsTheExpertsActivationOutput) {
  const ModelConfig m = testing::moe_shaped();
  const double copies = static_cast<double>(kSeq) * m.moe.top_k;
  EXPECT_DOUBLE_EQ(layer_bytes(m, mask({moe_act}), true),
                   unrecomputed_bytes(m, true) - 2.0 * copies * static_cast<double>(m.moe.ffn_hidden_size));
  EXPECT_DOUBLE_EQ(layer_bytes(testing::llama_shaped(), mask({moe_act}), false),
                   unrecomputed_bytes(testing::llama_shaped(), false));
}

TEST(RecomputeModulesMemory, MoeKeepsTheLayersInputOnly) {
  const ModelConfig m = with_shared_experts();
  const double copies = static_cast<double>(kSeq) * m.moe.top_k, h = static_cast<double>(m.hidden_size);
  const double f = static_cast<double>(m.moe.ffn_hidden_size), shared = 512;
  const double dropped = 4.0 * kSeq * m.moe.num_experts                    // fp32 router probabilities
                         + 2.0 * copies * (h + 2 * f + f + h)              // permuted, fc1 out, fc2 in, outputs
                         + 2.0 * kSeq * (2 * shared + shared);             // the shared experts'
  EXPECT_DOUBLE_EQ(layer_bytes(m, mask({moe}), true), unrecomputed_bytes(m, true) - dropped);
  EXPECT_DOUBLE_EQ(layer_bytes(m, mask({shared_experts}), true),
                   unrecomputed_bytes(m, true) - 2.0 * kSeq * (2 * shared + shared));
}

TEST(RecomputeModulesMemory, MlaUpProjDropsTheQueriesKeysAndValues) {
  const ModelConfig m = deepseek_v3(4);
  const std::int64_t seq = 4096;
  // 128 heads: queries and keys 128 + 64 wide each, values 128; bf16.
  const double qkv = 2.0 * seq * 128 * (192 + 192 + 128);
  EXPECT_DOUBLE_EQ(layer_bytes(m, mask({mla_up_proj}), false, seq), unrecomputed_bytes(m, false, seq) - qkv);
  // While a layer's backward runs, the largest block's dropped tensors are made again: here MLA's.
  EXPECT_DOUBLE_EQ(static_cast<double>(recomputed_modules_bytes(m, seq, 1, 1, false, 1, mask({mla_up_proj, mlp}))),
                   std::max(qkv, 2.0 * seq * 3 * static_cast<double>(m.ffn_hidden_size)));
}

// The recomputed ops of layer `layer`'s first backward, by kind and role, under selective recompute of `modules`.
std::map<std::pair<OpKind, OpRole>, int> recomputed_ops(const ModelConfig& m, std::vector<RecomputeModule> modules,
                                                        int layer, std::int64_t seq = kSeq) {
  const Scenario scenario = testing::make_scenario(m, 1, seq, 8);
  Strategy st = testing::make_strategy(1, 1, 1, false);
  st.recompute = Recompute::selective;
  st.recompute_modules = std::move(modules);
  EXPECT_EQ(complete_strategy(scenario, st), std::nullopt);
  EXPECT_EQ(invalid_reason(scenario, st), std::nullopt);
  const IterationGraph g = lower_to_op_graphs(scenario, st);
  std::map<std::pair<OpKind, OpRole>, int> out;
  const RankClass& rc = g.classes.front();
  for (OpIndex i = 0; i < rc.size(); ++i) {
    const Op& op = rc.op(i);
    if (op.recomputed && op.layer == layer && op.micro_batch == 0) ++out[{op.kind, op.role}];
  }
  return out;
}

using Ops = std::map<std::pair<OpKind, OpRole>, int>;
using K = OpKind;
using R = OpRole;

TEST(RecomputeModulesLowering, EachModuleRepeatsItsForwardOps) {
  const ModelConfig dense = testing::llama_shaped(2);
  EXPECT_EQ(recomputed_ops(dense, {core_attn}, 1), (Ops{{{K::attention_forward, R::core_attention}, 1}}));
  EXPECT_EQ(recomputed_ops(dense, {layernorm}, 1),
            (Ops{{{K::norm_forward, R::input_norm}, 1}, {{K::norm_forward, R::mlp_norm}, 1}}));
  EXPECT_EQ(recomputed_ops(dense, {mlp}, 1),
            (Ops{{{K::gemm, R::fc1}, 1}, {{K::activation_forward, R::activation}, 1}, {{K::gemm, R::fc2}, 1}}));
  const ModelConfig moe_model = with_shared_experts();
  EXPECT_EQ(recomputed_ops(moe_model, {moe_act}, 1), (Ops{{{K::activation_forward, R::expert_activation}, 1}}));
  EXPECT_EQ(recomputed_ops(moe_model, {shared_experts}, 1),
            (Ops{{{K::gemm, R::shared_expert_fc1}, 1},
                 {{K::activation_forward, R::shared_expert_activation}, 1},
                 {{K::gemm, R::shared_expert_fc2}, 1}}));
  const Ops whole_moe = recomputed_ops(moe_model, {moe}, 1);
  for (R role : {R::router, R::expert_fc1, R::expert_fc2, R::shared_expert_fc1})
    EXPECT_TRUE(std::ranges::any_of(whole_moe, [&](const auto& entry) { return entry.first.second == role; }))
        << to_string(role);
  EXPECT_EQ(whole_moe.count({K::attention_forward, R::core_attention}), 0u);
}

TEST(RecomputeModulesLowering, MlaUpProjRepeatsTheUpProjectionsAndRope) {
  const Ops ops = recomputed_ops(deepseek_v3(1), {mla_up_proj}, 0, 4096);
  EXPECT_EQ(ops, (Ops{{{K::gemm, R::mla_q_up}, 1},
                      {{K::gemm, R::mla_kv_up}, 1},
                      {{K::rope_forward, R::rope}, 1},
                      {{K::elementwise, R::mla_kv_expand}, 1}}));
}

}  // namespace
}  // namespace twin
