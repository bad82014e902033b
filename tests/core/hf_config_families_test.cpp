// The architectures of 2025-26 from their published config.json (tests/core/fixtures/hf/): each is read with the
// features it uses, its parameter count is within 0.5% of the published one, and what twin does not model is refused
// by name.
//
// Published counts: DeepSeek-V3 671B total, 37B activated (arXiv 2412.19437, abstract; without the 14B of its
// multi-token prediction module); Qwen3-235B-A22B 235B / 22B, Qwen3-30B-A3B 30.5B / 3.3B, Qwen3-8B 8.2B (their
// Hugging Face model cards); gpt-oss-120b 116.83B / 5.13B, gpt-oss-20b 20.91B / 3.61B (gpt-oss model card, arXiv
// 2508.10925, Table 1); Gemma-2-9B 9.24B, Gemma-2-27B 27.2B and Mistral-7B-v0.1 7,241,732,096 (the Hugging Face
// model pages' safetensors counts); DeepSeek-V2 236B total, 21B activated, and DeepSeek-V2-Lite 15.7B total
// (arXiv 2405.04434, abstract and Appendix B); Qwen1.5-MoE-A2.7B 14.3B total (its model card); Qwen2-57B-A14B 57.4B
// (its Hugging Face model page's safetensors count); Phi-3-mini 3.82B (its model page's safetensors count); Gemma-3
// 1B 302M embedding + 698M other (Gemma 3 Technical Report, arXiv 2503.19786, Table 1).
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/hf_config.hpp"
#include "core/input_file.hpp"
#include "tests/core/hf_fixtures.hpp"

namespace twin {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json fixture(const std::string& file) { return testing::hf_fixture(file); }

ModelConfig model(const json& config, const std::string& file = "config.json") {
  return model_from_hf_config(config, file);
}

// The one error line the model's config gives.
std::string refusal(const json& config) {
  try {
    model(config);
  } catch (const InputError& e) {
    return e.what();
  }
  return "accepted";
}

struct Published {
  const char* file;
  double total;
};

TEST(HfConfigFamilies, ParameterCountsWithinHalfAPercentOfThePublishedOnes) {
  const Published published[] = {
      {"qwen3-8b-config.json", 8.2e9},           {"qwen3-30b-a3b-config.json", 30.5e9},
      {"qwen3-235b-a22b-config.json", 235e9},    {"gpt-oss-120b-config.json", 116.83e9},
      {"gpt-oss-20b-config.json", 20.91e9},      {"gemma-2-9b-config.json", 9.24e9},
      {"gemma-2-27b-config.json", 27.2e9},
      {"mistral-7b-v0.1-config.json", 7241732096.0},
      {"deepseek-v2-config.json", 236e9},        {"deepseek-v2-lite-config.json", 15.7e9},
      {"qwen1.5-moe-a2.7b-config.json", 14.3e9}, {"qwen2-57b-a14b-config.json", 57.4e9},
      {"phi-3-mini-4k-config.json", 3.82e9},     {"gemma-3-1b-config.json", 1.0e9},
  };
  for (const Published& p : published) {
    const double count = static_cast<double>(parameter_count(model(fixture(p.file))));
    EXPECT_NEAR(count / p.total, 1.0, 0.005) << p.file << ": " << count;
  }
  json deepseek = fixture("deepseek-v3-config.json");
  deepseek["num_nextn_predict_layers"] = 0;  // the main model, as transformers loads it
  EXPECT_NEAR(static_cast<double>(parameter_count(model(deepseek))) / 671e9, 1.0, 0.005);
}

// Mistral's count is published to the parameter (its safetensors' total): twin's is exact.
TEST(HfConfigFamilies, MistralCountsExactly) {
  EXPECT_EQ(parameter_count(model(fixture("mistral-7b-v0.1-config.json"))), 7241732096LL);
}

TEST(HfConfigFamilies, DeepSeekV3IsMlaWithSharedExpertsAfterThreeDenseLayers) {
  json config = fixture("deepseek-v3-config.json");
  config["num_nextn_predict_layers"] = 0;
  const ModelConfig m = model(config);
  EXPECT_EQ(m.mla.q_lora_rank, 1536);
  EXPECT_EQ(m.mla.kv_lora_rank, 512);
  EXPECT_EQ(m.mla.qk_head_dim, 128);
  EXPECT_EQ(m.mla.qk_pos_emb_head_dim, 64);
  EXPECT_EQ(m.mla.v_head_dim, 128);
  EXPECT_EQ(m.moe.num_experts, 256);
  EXPECT_EQ(m.moe.top_k, 8);
  EXPECT_EQ(m.moe.shared_expert_ffn_hidden_size, 2048);
  EXPECT_EQ(m.moe.first_dense_layers, 3);
  EXPECT_FALSE(m.is_moe_layer(2));
  EXPECT_TRUE(m.is_moe_layer(3));
  EXPECT_EQ(m.num_moe_layers(), 58);
  // A dense layer: MLA's attention and the dense MLP of 18432.
  const LayerParameterGroups dense = layer_parameter_groups(m, 0);
  EXPECT_EQ(dense.mlp_weights, 3LL * 7168 * 18432);
  EXPECT_EQ(dense.replicated, 2 * 7168 + 7168LL * 1536 + 1536 + 7168LL * (512 + 64) + 512);
  EXPECT_EQ(dense.attention_weights, 1536LL * 128 * 192 + 512LL * 128 * 256 + 128LL * 128 * 7168);
  const LayerParameterGroups moe = layer_parameter_groups(m, 3);
  EXPECT_EQ(moe.mlp_weights_shared, 3LL * 7168 * 2048);
  EXPECT_EQ(moe.per_expert, 3LL * 7168 * 2048);
}

TEST(HfConfigFamilies, EachFamilyCarriesItsFeatures) {
  const ModelConfig qwen = model(fixture("qwen3-8b-config.json"));
  EXPECT_TRUE(qwen.qk_layernorm);
  EXPECT_EQ(qwen.window_size, 0);
  const ModelConfig qwen_moe = model(fixture("qwen3-30b-a3b-config.json"));
  EXPECT_EQ(qwen_moe.moe.num_experts, 128);
  EXPECT_EQ(qwen_moe.moe.top_k, 8);
  EXPECT_EQ(qwen_moe.moe.ffn_hidden_size, 768);
  EXPECT_EQ(qwen_moe.num_moe_layers(), 48);
  const ModelConfig oss = model(fixture("gpt-oss-120b-config.json"));
  EXPECT_TRUE(oss.attention_sinks);
  EXPECT_EQ(oss.activation, Activation::quick_geglu);  // GptOssExperts' clamped GLU: alpha 1.702, up + 1
  EXPECT_EQ(oss.glu_linear_offset, 1);
  EXPECT_EQ(oss.activation_func_clamp_value, 7);  // swiglu_limit
  EXPECT_TRUE(oss.add_bias_linear);
  EXPECT_EQ(oss.window_size, 128);
  EXPECT_EQ(oss.window_attn_skip_freq, 2);
  EXPECT_TRUE(oss.is_windowed_layer(0));
  EXPECT_FALSE(oss.is_windowed_layer(1));
  const ModelConfig gemma = model(fixture("gemma-2-9b-config.json"));
  EXPECT_EQ(gemma.activation, Activation::geglu);
  EXPECT_EQ(gemma.kv_channels, 256);
  EXPECT_TRUE(gemma.post_norms);
  EXPECT_FALSE(gemma.untie_embeddings_and_output_weights);
  EXPECT_EQ(gemma.attention_softcap, 50.0);
  EXPECT_EQ(gemma.final_logit_softcap, 30.0);
  EXPECT_TRUE(gemma.is_windowed_layer(0));
  EXPECT_FALSE(gemma.is_windowed_layer(1));
  const ModelConfig mistral = model(fixture("mistral-7b-v0.1-config.json"));
  EXPECT_EQ(mistral.window_size, 4096);
  EXPECT_EQ(mistral.window_attn_skip_freq, 0);
  EXPECT_TRUE(mistral.is_windowed_layer(31));
  EXPECT_EQ(model(fixture("mixtral-8x7b-config.json")).window_size, 0);  // sliding_window null
  const ModelConfig phi = model(fixture("phi-3-mini-4k-config.json"));
  EXPECT_EQ(phi.activation, Activation::swiglu);
  EXPECT_EQ(phi.window_size, 2047);
  const ModelConfig gemma3 = model(fixture("gemma-3-1b-config.json"));
  EXPECT_TRUE(gemma3.qk_layernorm);
  EXPECT_TRUE(gemma3.post_norms);
  EXPECT_EQ(gemma3.attention_softcap, 0.0);
  EXPECT_EQ(gemma3.kv_channels, 256);
  EXPECT_EQ(gemma3.num_query_groups, 1);
  EXPECT_EQ(gemma3.window_size, 512);
  EXPECT_EQ(gemma3.window_attn_skip_freq, 6);  // five local layers, then a global one
  EXPECT_TRUE(gemma3.is_windowed_layer(4));
  EXPECT_FALSE(gemma3.is_windowed_layer(5));
}

// DeepSeek-V2 is V3's layer (MLA, shared experts after dense layers); V2-Lite has no query latent (q_lora_rank
// null: the direct query projection). Qwen2-MoE is Qwen3-MoE's experts with one wide shared expert, no QK-norm.
TEST(HfConfigFamilies, DeepSeekV2AndQwen2MoeCarryTheirExperts) {
  const ModelConfig v2 = model(fixture("deepseek-v2-config.json"));
  EXPECT_EQ(v2.mla.q_lora_rank, 1536);
  EXPECT_EQ(v2.moe.num_experts, 160);
  EXPECT_EQ(v2.moe.top_k, 6);
  EXPECT_EQ(v2.moe.shared_expert_ffn_hidden_size, 2 * 1536);
  EXPECT_EQ(v2.num_moe_layers(), 59);
  const ModelConfig lite = model(fixture("deepseek-v2-lite-config.json"));
  EXPECT_EQ(lite.mla.q_lora_rank, 0);
  EXPECT_EQ(lite.mla.kv_lora_rank, 512);
  EXPECT_EQ(lite.num_query_groups, 16);
  EXPECT_EQ(lite.kv_channels, 192);
  const ModelConfig qwen2 = model(fixture("qwen2-57b-a14b-config.json"));
  EXPECT_EQ(qwen2.moe.num_experts, 64);
  EXPECT_EQ(qwen2.moe.top_k, 8);
  EXPECT_EQ(qwen2.moe.ffn_hidden_size, 2560);
  EXPECT_EQ(qwen2.moe.shared_expert_ffn_hidden_size, 20480);
  EXPECT_EQ(qwen2.num_query_groups, 4);
  EXPECT_FALSE(qwen2.qk_layernorm);
  EXPECT_EQ(qwen2.num_moe_layers(), 28);
  json missing = fixture("qwen1.5-moe-a2.7b-config.json");
  missing.erase("shared_expert_intermediate_size");
  EXPECT_NE(refusal(missing).find("shared_expert_intermediate_size"), std::string::npos);
}

TEST(HfConfigFamilies, ActiveCountsTakeTopKExpertsAndTheSharedOnes) {
  json config = fixture("deepseek-v3-config.json");
  config["num_nextn_predict_layers"] = 0;
  const ModelConfig m = model(config);
  const LayerParameterGroups moe = layer_parameter_groups(m, 3);
  EXPECT_EQ(parameter_count(m) - active_parameter_count(m), 58LL * (256 - 8) * moe.per_expert);
}

// DeepSeek-V3's MTP depth (num_nextn_predict_layers 1) is Megatron's mtp_num_layers: a MoE layer as the last one,
// enorm, hnorm, its final norm and eh_proj (2h x h); Megatron shares the embedding and the output head with it.
// The Hugging Face checkpoint stores the depth with its own copies of both (model.layers.61.embed_tokens and
// shared_head.head): "685B, which includes 671B of the Main Model weights and 14B of the Multi-Token Prediction (MTP)
// Module weights" (deepseek-ai/DeepSeek-V3's README).
TEST(HfConfigFamilies, DeepSeekV3ReadsItsMtpDepth) {
  const ModelConfig m = model(fixture("deepseek-v3-config.json"));
  EXPECT_EQ(m.mtp_num_layers, 1);
  json main_only = fixture("deepseek-v3-config.json");
  main_only["num_nextn_predict_layers"] = 0;
  const ModelConfig main = model(main_only);
  const std::int64_t h = 7168, vocab = 129280;
  EXPECT_TRUE(m.is_moe_layer(61));
  EXPECT_EQ(parameter_count(m) - parameter_count(main), layer_parameter_count(main, 60) + 3 * h + 2 * h * h);
  EXPECT_EQ(parameter_count(m) - parameter_count(main), 11610067968LL);
  EXPECT_NEAR(static_cast<double>(parameter_count(m) + 2 * vocab * h) / 685e9, 1.0, 0.005);
}

TEST(HfConfigFamilies, WhatIsNotModelledIsRefusedByName) {
  json qwen = fixture("qwen3-8b-config.json");
  qwen["use_sliding_window"] = true;
  EXPECT_NE(refusal(qwen).find("use_sliding_window true is not modelled"), std::string::npos);
  json qwen_moe = fixture("qwen3-30b-a3b-config.json");
  qwen_moe["decoder_sparse_step"] = 2;
  EXPECT_NE(refusal(qwen_moe).find("/decoder_sparse_step: decoder_sparse_step 2 is not modelled"), std::string::npos);
  qwen_moe["decoder_sparse_step"] = 1;
  qwen_moe["mlp_only_layers"] = {0, 5};
  EXPECT_NE(refusal(qwen_moe).find("mlp_only_layers is not modelled"), std::string::npos);
  json oss = fixture("gpt-oss-20b-config.json");
  oss["layer_types"][2] = "full_attention";
  EXPECT_NE(refusal(oss).find("/layer_types/2: layer types that are not"), std::string::npos);
  oss["layer_types"] = json::array({"sliding_attention"});
  EXPECT_NE(refusal(oss).find("/layer_types: expected one entry per layer (24)"), std::string::npos);
  json gemma = fixture("gemma-2-9b-config.json");
  gemma["attention_bias"] = true;
  EXPECT_NE(refusal(gemma).find("attention_bias true is not modelled"), std::string::npos);
  json deepseek = fixture("deepseek-v3-config.json");
  deepseek["num_nextn_predict_layers"] = 0;
  deepseek["first_k_dense_replace"] = 61;
  EXPECT_NE(refusal(deepseek).find("expected moe.first_dense_layers below num_layers 61"), std::string::npos);
}

}  // namespace
}  // namespace twin
