// Multi-latent attention in the simulator, for DeepSeek-V3 as its published config.json has it: one layer's ops are
// the steps executor/gpu/mla_attention.cpp runs, in its order and shapes; the linears' weights are the ones core
// counts; attention is priced with d_qk 192 and d_v 128 (its FLOPs and its kernel key); the memory model keeps what
// the block saves; MFU's FLOPs are DeepSeek-V3's 37B activated parameters; CP > 1 is refused by name.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/hf_config.hpp"
#include "cost/profile.hpp"
#include "cost/shape_space.hpp"
#include "strategies/flops.hpp"
#include "strategies/lowering.hpp"
#include "strategies/memory.hpp"
#include "strategies/validity.hpp"
#include "strategy_fixtures.hpp"
#include "tests/core/hf_fixtures.hpp"

namespace twin {
namespace {

constexpr std::int64_t kMlaSeq = 4096;

ModelConfig mla_deepseek_v3() {
  nlohmann::json config = testing::hf_fixture("deepseek-v3-config.json");
  config["num_nextn_predict_layers"] = 0;  // the main model, as transformers loads it
  return model_from_hf_config(config, "deepseek-v3-config.json");
}

IterationGraph mla_lowered(const ModelConfig& m) {
  const Scenario scenario = testing::make_scenario(m, 1, kMlaSeq, 8);
  Strategy st = testing::make_strategy(1, 1, 1, false);
  st.micro_batch_size = 1;
  EXPECT_EQ(complete_strategy(scenario, st), std::nullopt);
  EXPECT_EQ(invalid_reason(scenario, st), std::nullopt);
  return lower_to_op_graphs(scenario, st);
}

// The first micro-batch's ops of layer 0 in `phase`, not recomputed, from the input norm's to the output
// projection's (forward) or back (backward), in issue order.
std::vector<Op> mla_attention_ops(const IterationGraph& g, Phase phase) {
  std::vector<Op> ops;
  const RankClass& rc = g.classes.front();
  for (OpIndex i = 0; i < rc.size(); ++i) {
    const Op& op = rc.op(i);
    if (op.layer == 0 && op.micro_batch == 0 && op.phase == phase && !op.recomputed) ops.push_back(op);
  }
  const auto at = [&](OpRole role) {
    for (std::size_t i = 0; i < ops.size(); ++i)
      if (ops[i].role == role) return i;
    return ops.size();
  };
  const std::size_t first = std::min({at(OpRole::mla_q_down), at(OpRole::mla_q_up), at(OpRole::core_attention)});
  const std::size_t last = phase == Phase::forward ? at(OpRole::attention_projection) : ops.size();
  std::vector<Op> attention(ops.begin() + static_cast<std::ptrdiff_t>(first),
                            ops.begin() + static_cast<std::ptrdiff_t>(last));
  std::erase_if(attention, [](const Op& op) { return op.role == OpRole::input_norm; });
  return attention;
}

std::vector<std::pair<OpKind, OpRole>> mla_steps(const std::vector<Op>& ops) {
  std::vector<std::pair<OpKind, OpRole>> out;
  for (const Op& op : ops) out.emplace_back(op.kind, op.role);
  return out;
}

TEST(MlaLowering, OneLayersForwardIsTheExecutorsSteps) {
  ModelConfig m = mla_deepseek_v3();
  m.num_layers = 2;  // dense first layers (DeepSeek-V3 has three)
  const std::vector<Op> ops = mla_attention_ops(mla_lowered(m), Phase::forward);
  using K = OpKind;
  using R = OpRole;
  // MlaAttention::forward: q down, its norm, q up; kv down, the latent's copy, its norm, kv up; RoPE; the expansion;
  // attention.
  const std::vector<std::pair<OpKind, OpRole>> expected{
      {K::gemm, R::mla_q_down},          {K::norm_forward, R::mla_q_norm},  {K::gemm, R::mla_q_up},
      {K::gemm, R::mla_kv_down},         {K::elementwise, R::mla_kv_norm},  {K::norm_forward, R::mla_kv_norm},
      {K::gemm, R::mla_kv_up},           {K::rope_forward, R::rope},        {K::elementwise, R::mla_kv_expand},
      {K::attention_forward, R::core_attention}};
  ASSERT_EQ(mla_steps(ops), expected);
  const auto gemm = [&](std::size_t i, std::int64_t n, std::int64_t k) {
    EXPECT_EQ(ops[i].gemm.m, kMlaSeq) << i;
    EXPECT_EQ(ops[i].gemm.n, n) << i;
    EXPECT_EQ(ops[i].gemm.k, k) << i;
  };
  gemm(0, 1536, 7168);       // [tokens, hidden] x [hidden, q_lora_rank]
  gemm(2, 128 * 192, 1536);  // heads x (nope 128 + rope 64)
  gemm(3, 512 + 64, 7168);   // the kv latent and the shared RoPE key
  gemm(6, 128 * 256, 512);   // heads x (nope 128 + v 128)
  EXPECT_EQ(ops[1].cols, 1536);
  EXPECT_EQ(ops[5].cols, 512);
  EXPECT_EQ(ops[7].cols, 129 * 64);  // every head's query rope part and the one shared key's
  // The expansion reads kv [t, 128 x 256] and the RoPE key [t, 64], writes K [t, 128 x 192] and V [t, 128 x 128].
  EXPECT_EQ(ops[8].bytes, 2 * kMlaSeq * (128 * 256 + 64 + 128 * 192 + 128 * 128));
  const AttentionShape& a = ops[9].attention;
  EXPECT_EQ(a.heads, 128);
  EXPECT_EQ(a.kv_heads, 128);
  EXPECT_EQ(a.head_dim, 192);
  EXPECT_EQ(value_head_dim(a), 128);
  // Q K^T over 192 and P V over 128, half of the causal square.
  EXPECT_DOUBLE_EQ(ops[9].flops, 2.0 * 128 * kMlaSeq * kMlaSeq * (192 + 128) * 0.5);
}

TEST(MlaLowering, OneLayersBackwardIsTheExecutorsStepsReversed) {
  ModelConfig m = mla_deepseek_v3();
  m.num_layers = 2;
  const std::vector<Op> ops = mla_attention_ops(mla_lowered(m), Phase::backward);
  std::vector<std::pair<OpKind, OpRole>> mla;
  const auto in_block = [](OpRole role) {
    return role == OpRole::core_attention || role == OpRole::rope ||
           (role >= OpRole::mla_q_down && role <= OpRole::mla_kv_expand);
  };
  for (const Op& op : ops)
    if (in_block(op.role) && op.kind != OpKind::elementwise)
      mla.emplace_back(op.kind, op.gemm_pass == GemmPass::weight_gradient ? OpRole::none : op.role);
  using K = OpKind;
  using R = OpRole;
  // MlaAttention::backward: attention, the expansion's sum, RoPE, then kv up, its norm, kv down, q up, its norm and
  // q down, each linear's input gradient (its weight gradient beside it: OpRole::none here).
  const std::vector<std::pair<OpKind, OpRole>> expected{
      {K::attention_backward, R::core_attention}, {K::rope_backward, R::rope},
      {K::gemm, R::mla_kv_up},    {K::gemm, R::none}, {K::norm_backward, R::mla_kv_norm},
      {K::gemm, R::mla_kv_down},  {K::gemm, R::none},
      {K::gemm, R::mla_q_up},     {K::gemm, R::none}, {K::norm_backward, R::mla_q_norm},
      {K::gemm, R::mla_q_down},   {K::gemm, R::none}};
  EXPECT_EQ(mla, expected);
  int expansions = 0;
  for (const Op& op : ops) expansions += op.role == OpRole::mla_kv_expand ? 1 : 0;
  EXPECT_EQ(expansions, 1);
}

// Every MLA linear's forward GEMM is its weight (k x n), and with the latents' norms and the output projection they
// are core's count of the layer's attention (layer_parameter_groups, which holds DeepSeek-V3 within 0.5% of 671B).
TEST(MlaLowering, TheLinearsAreTheCountedWeights) {
  for (const std::int64_t q_lora_rank : {1536, 0}) {
    ModelConfig m = mla_deepseek_v3();
    m.num_layers = 2;
    m.mla.q_lora_rank = q_lora_rank;
    std::int64_t elements = 0;
    for (const Op& op : mla_attention_ops(mla_lowered(m), Phase::forward)) {
      if (op.kind == OpKind::gemm) elements += op.gemm.n * op.gemm.k;
      if (op.kind == OpKind::norm_forward) elements += op.cols;  // the latents' norm weights
    }
    elements += 128 * 128 * 7168;  // the output projection, from heads x v_head_dim
    const LayerParameterGroups g = layer_parameter_groups(m, 0);
    EXPECT_EQ(elements, g.attention_weights + g.replicated - 2 * m.hidden_size) << q_lora_rank;
  }
}

TEST(MlaLowering, AttentionsKernelKeyCarriesTheValuesHeadDim) {
  ModelConfig m = mla_deepseek_v3();
  m.num_layers = 2;
  const std::vector<Op> ops = mla_attention_ops(mla_lowered(m), Phase::forward);
  const std::string key = kernel_shape_key(ops.back());
  EXPECT_NE(key.find(",d=192,"), std::string::npos) << key;
  EXPECT_NE(key.find(",dv=128"), std::string::npos) << key;
  const std::optional<Op> parsed = op_from_kernel_key(key);
  ASSERT_TRUE(parsed.has_value()) << key;
  EXPECT_EQ(parsed->attention.v_head_dim, 128);
  EXPECT_EQ(kernel_shape_key(*parsed), key);
}

// MFU's FLOPs: 6 x the activated parameters per token plus attention. DeepSeek-V3 publishes "37B activated"
// (arXiv 2412.19437), leaving out the input embedding (a lookup, no GEMM: docs/SIMULATOR.md's table), rounded to the
// billion: the weights' FLOPs per token over 2 round to 37B.
TEST(MlaLowering, ModelFlopsAreDeepSeekV3sActivatedParameters) {
  const ModelConfig m = mla_deepseek_v3();
  Scenario s = testing::make_scenario(m, 1, kMlaSeq, 8);
  const double tokens = 8.0 * kMlaSeq;
  // Attention per token, forward: 2 x seq x heads x (192 + 128) x one half, over 61 layers.
  const double attention = 61 * 2.0 * kMlaSeq * 128 * (192 + 128) * 0.5;
  const double activated = (model_flops_per_iteration(s) / (3 * tokens) - attention) / 2;
  EXPECT_GE(activated, 36.5e9);
  EXPECT_LT(activated, 37.5e9);
}

// The memory model keeps what the layer saves: the norms' inputs, the down projections' input, each latent before and
// after its norm, Q and the expanded K (192 per head), V and the output (128 per head), the log-sum-exp, the MLP's.
TEST(MlaLowering, TheMemoryModelKeepsTheBlocksSavedTensors) {
  ModelConfig m = mla_deepseek_v3();
  m.hidden_dropout = 0;
  const std::int64_t h = 7168, heads = 128, ffn = m.ffn_hidden_size;
  const double elements = 2 * h /* norms */ + 2 * h /* down projections' and fc1's input */ + 2 * 1536 + 2 * 512 +
                          2 * heads * 192 + heads * 128 + heads * 128 + 2 * ffn + ffn;
  const double expected = kMlaSeq * (2 * elements + 4 * heads);
  EXPECT_EQ(activation_bytes_per_layer(m, kMlaSeq, 1, 1, false, 1, Recompute::none, false, 1, false),
            static_cast<Bytes>(expected));
}

// Tensor parallelism is lowered (tests/strategies/mla_tensor_parallel_test.cpp); context parallelism is refused.
TEST(MlaLowering, TensorParallelismIsAcceptedAndContextParallelismRefused) {
  const ModelConfig m = mla_deepseek_v3();
  const Scenario scenario = testing::make_scenario(m, 1, kMlaSeq, 8);
  for (const auto& [tp, cp] : {std::pair{2, 1}, std::pair{1, 2}}) {
    Strategy st = testing::make_strategy(tp, 1, cp, tp > 1);  // an MoE model at TP 2 needs SP (its experts)
    st.micro_batch_size = 1;
    ASSERT_EQ(complete_strategy(scenario, st), std::nullopt);
    const std::optional<std::string> reason = invalid_reason(scenario, st);
    if (tp == 2) {
      EXPECT_EQ(reason, std::nullopt);
      continue;
    }
    ASSERT_TRUE(reason.has_value());
    EXPECT_NE(reason->find("multi-latent attention"), std::string::npos) << *reason;
  }
}

}  // namespace
}  // namespace twin
