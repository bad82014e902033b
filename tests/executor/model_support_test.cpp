// The one list of model features twin execute does not run (executor/model_support.hpp).
#include "executor/model_support.hpp"

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "core/model.hpp"

namespace twin::exec {
namespace {

ModelConfig llama() { return *model_preset("llama2-7b"); }

TEST(ModelSupport, LlamaAndMixtralRun) {
  EXPECT_FALSE(first_unsupported_feature(llama()).has_value());
  EXPECT_FALSE(first_unsupported_feature(*model_preset("mixtral-8x7b")).has_value());
}

// GPT-style dense models: LayerNorm, learned positions and linear biases, each alone and together (GPT-3's preset
// with fused attention), run; so do experts with biases (gpt-oss's).
TEST(ModelSupport, GptStyleDenseModelsRun) {
  ModelConfig gpt = *model_preset("gpt3-175b");
  gpt.attention_backend = AttentionBackend::flash;
  gpt.hidden_dropout = gpt.attention_dropout = 0;
  gpt.add_bias_linear = true;
  ASSERT_EQ(gpt.normalization, Normalization::layernorm);
  ASSERT_FALSE(gpt.position_embedding_rope);
  EXPECT_FALSE(first_unsupported_feature(gpt).has_value());
  for (const auto& change : std::vector<std::function<void(ModelConfig&)>>{
           [](ModelConfig& m) { m.normalization = Normalization::layernorm; },
           [](ModelConfig& m) { m.position_embedding_rope = false; },
           [](ModelConfig& m) { m.add_bias_linear = true; }}) {
    ModelConfig m = llama();
    change(m);
    EXPECT_FALSE(first_unsupported_feature(m).has_value());
  }
  ModelConfig biased_experts = *model_preset("mixtral-8x7b");  // gpt-oss's experts and router have biases
  biased_experts.add_bias_linear = true;
  EXPECT_FALSE(first_unsupported_feature(biased_experts).has_value());
}

TEST(ModelSupport, EachFeatureIsNamedAtItsOwnKey) {
  const std::vector<std::pair<std::string, std::function<void(ModelConfig&)>>> cases = {
      {"qk_layernorm", [](ModelConfig& m) {  // QK-norm runs as Qwen3's, RMSNorm over each head
         m.qk_layernorm = true;
         m.normalization = Normalization::layernorm;
       }},
      {"window_size", [](ModelConfig& m) {  // windows run on a layer's own attention, not on MLA's
         m.window_size = 4096;
         m.mla.kv_lora_rank = 512;
       }},
      {"attention_sinks", [](ModelConfig& m) {  // sinks run on a layer's own attention, not on MLA's
         m.attention_sinks = true;
         m.mla.kv_lora_rank = 512;
       }},
      {"attention_dropout", [](ModelConfig& m) {
         m.attention_sinks = true;
         m.attention_dropout = 0.1;
       }},
      {"attention_softcap", [](ModelConfig& m) {  // capped scores run on a layer's own attention, not on MLA's
         m.attention_softcap = 50;
         m.mla.kv_lora_rank = 512;
       }},
      {"attention_dropout", [](ModelConfig& m) {
         m.attention_softcap = 50;
         m.attention_dropout = 0.1;
       }},
      {"post_norms", [](ModelConfig& m) {  // post norms run in dense layers only
         m.post_norms = true;
         m.moe = model_preset("mixtral-8x7b")->moe;
       }},
      {"post_norms", [](ModelConfig& m) {
         m.post_norms = true;
         m.mla.kv_lora_rank = 512;
       }},
      {"mtp_num_layers", [](ModelConfig& m) { m.mtp_num_layers = 1; }},
      {"hidden_dropout", [](ModelConfig& m) {  // hidden dropout runs in dense pre-norm layers only
         m.hidden_dropout = 0.1;
         m.moe = model_preset("mixtral-8x7b")->moe;
       }},
      {"hidden_dropout", [](ModelConfig& m) {
         m.hidden_dropout = 0.1;
         m.post_norms = true;
       }},
      {"hidden_dropout", [](ModelConfig& m) {
         m.hidden_dropout = 0.1;
         m.mla.kv_lora_rank = 512;
       }},
      {"attention_dropout", [](ModelConfig& m) {
         m.attention_dropout = 0.1;
         m.mla.kv_lora_rank = 512;
       }},
      {"attention_dropout", [](ModelConfig& m) {
         m.attention_dropout = 0.1;
         m.window_size = 4096;
       }},
      {"attention_backend", [](ModelConfig& m) {  // MLA's block calls the fused backends itself
         m.attention_backend = AttentionBackend::unfused;
         m.mla.kv_lora_rank = 512;
       }},
      {"window_size", [](ModelConfig& m) {  // unfused attention runs whole causal scores only
         m.attention_backend = AttentionBackend::unfused;
         m.window_size = 4096;
       }},
      {"attention_softcap", [](ModelConfig& m) {
         m.attention_backend = AttentionBackend::unfused;
         m.attention_softcap = 50;
       }},
      {"attention_sinks", [](ModelConfig& m) {
         m.attention_backend = AttentionBackend::unfused;
         m.attention_sinks = true;
       }},
  };
  for (const auto& [path, change] : cases) {
    ModelConfig m = llama();
    change(m);
    const auto unsupported = first_unsupported_feature(m);
    ASSERT_TRUE(unsupported.has_value()) << path;
    EXPECT_EQ(unsupported->path, path);
    EXPECT_FALSE(unsupported->feature.empty());
  }
}

// GPT's hidden dropout (Megatron's bias-dropout-add and embedding dropout) runs in dense pre-norm layers, Llama's
// and GPT's (since 2026-11-30; before, refused at its key), and attention dropout inside cuDNN's fused attention
// (since 2026-11-30, later; before, refused at its key).
TEST(ModelSupport, HiddenAndAttentionDropoutRunInDenseLayers) {
  ModelConfig m = llama();
  m.hidden_dropout = 0.1;
  EXPECT_FALSE(first_unsupported_feature(m).has_value());
  m.attention_dropout = 0.1;
  EXPECT_FALSE(first_unsupported_feature(m).has_value());
}

// Unfused attention runs as Megatron-LM's kernels (since 2026-12-03; before, refused at its key), with attention
// dropout too: Narayanan's and Korthikanti's GPT models as their runs configured them.
TEST(ModelSupport, UnfusedAttentionRuns) {
  ModelConfig m = llama();
  m.attention_backend = AttentionBackend::unfused;
  EXPECT_FALSE(first_unsupported_feature(m).has_value());
  m.attention_dropout = 0.1;
  EXPECT_FALSE(first_unsupported_feature(m).has_value());
}

// Gemma-2 and 3 (GeGLU, post norms, soft-capped final logits, QK-norm in Gemma-3) and Nemotron-4 (squared ReLU,
// LayerNorm) run (since 2026-11-29; before, each was refused at its key); so do Gemma-2's soft-capped attention
// scores (since 2026-12-01).
TEST(ModelSupport, GemmaAndNemotronShapesRun) {
  ModelConfig gemma = llama();
  gemma.activation = Activation::geglu;
  gemma.post_norms = true;
  gemma.final_logit_softcap = 30;
  gemma.qk_layernorm = true;
  EXPECT_FALSE(first_unsupported_feature(gemma).has_value());
  gemma.attention_softcap = 50;
  EXPECT_FALSE(first_unsupported_feature(gemma).has_value());
  ModelConfig nemotron = llama();
  nemotron.activation = Activation::squared_relu;
  nemotron.normalization = Normalization::layernorm;
  nemotron.position_embedding_rope = true;
  EXPECT_FALSE(first_unsupported_feature(nemotron).has_value());
}

// Qwen3's QK-norm, fine-grained experts (128, top-8), shared experts and dense first layers run (since 2026-11-29;
// before, each was refused at its key); so does MLA (since 2026-11-29, at TP 1 and CP 1: the plan check refuses the
// rest at /scenario/model/mla, tests/executor/mla_binding_test.cpp).
TEST(ModelSupport, QwenThreeAndDeepSeekShapesRun) {
  ModelConfig qwen3 = *model_preset("mixtral-8x7b");
  qwen3.qk_layernorm = true;
  qwen3.moe.num_experts = 128;
  qwen3.moe.top_k = 8;
  EXPECT_FALSE(first_unsupported_feature(qwen3).has_value());
  ModelConfig deepseek = *model_preset("mixtral-8x7b");
  deepseek.moe.shared_expert_ffn_hidden_size = 1024;
  deepseek.moe.first_dense_layers = 1;
  EXPECT_FALSE(first_unsupported_feature(deepseek).has_value());
  deepseek.mla.kv_lora_rank = 512;
  ASSERT_TRUE(deepseek.mla.enabled());
  EXPECT_FALSE(first_unsupported_feature(deepseek).has_value());
  // V3's router: sigmoid scores, the expert bias, groups (8 of 256 experts, 4 chosen); more groups than the router
  // holds for a token are refused at their key.
  deepseek.moe.num_experts = 256;
  deepseek.moe.router_score_function = RouterScore::sigmoid;
  deepseek.moe.router_expert_bias = true;
  deepseek.moe.router_num_groups = 8;
  deepseek.moe.router_group_topk = 4;
  EXPECT_FALSE(first_unsupported_feature(deepseek).has_value());
  deepseek.moe.router_num_groups = 64;
  ASSERT_TRUE(first_unsupported_feature(deepseek).has_value());
  EXPECT_EQ(first_unsupported_feature(deepseek)->path, "moe/router_num_groups");
}

// A capacity (Megatron's --moe-expert-capacity-factor) drops copies, and twin execute drops them (since 2026-12-02;
// refused at its key that morning, run dropless before); with aux-loss-free balancing, whose biases Megatron steps by
// the kept copies where the executor keeps the routed ones, it is refused at its key.
TEST(ModelSupport, AnExpertCapacityRunsButNotBesideLossFreeBalancing) {
  ModelConfig mixtral = *model_preset("mixtral-8x7b");
  mixtral.moe.expert_capacity_factor = 1.25;
  EXPECT_FALSE(first_unsupported_feature(mixtral).has_value());
  mixtral.moe.pad_expert_input_to_capacity = true;
  EXPECT_FALSE(first_unsupported_feature(mixtral).has_value());
  mixtral.moe.router_score_function = RouterScore::sigmoid;
  mixtral.moe.router_expert_bias = true;
  ASSERT_TRUE(first_unsupported_feature(mixtral).has_value());
  EXPECT_EQ(first_unsupported_feature(mixtral)->path, "moe/expert_capacity_factor");
}

// Sliding windows run (since 2026-11-29; before, refused at window_size): on every layer (Mistral) and on
// alternating ones (Gemma-2, gpt-oss: window_attn_skip_freq 2), each layer's attention op carrying its window.
// Soft-capped scores (since 2026-12-01) and gpt-oss's attention sinks (since 2026-12-02) run beside them.
TEST(ModelSupport, SlidingWindowsSoftCappingAndSinksRun) {
  ModelConfig mistral = llama();
  mistral.window_size = 4096;
  EXPECT_FALSE(first_unsupported_feature(mistral).has_value());
  ModelConfig alternating = mistral;
  alternating.window_attn_skip_freq = 2;
  EXPECT_FALSE(first_unsupported_feature(alternating).has_value());
  ModelConfig sinks = alternating;
  sinks.attention_sinks = true;
  EXPECT_FALSE(first_unsupported_feature(sinks).has_value());
  ModelConfig capped = alternating;
  capped.attention_softcap = 50;
  EXPECT_FALSE(first_unsupported_feature(capped).has_value());
}

}  // namespace
}  // namespace twin::exec
