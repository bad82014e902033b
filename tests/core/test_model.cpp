// Model presets against their published parameter counts, and the counting rules in closed form.
#include <gtest/gtest.h>

#include "core/model.hpp"

namespace twin {
namespace {

ModelConfig preset(const char* name) {
  auto m = model_preset(name);
  EXPECT_TRUE(m.has_value()) << name;
  return m.value_or(ModelConfig{});
}

void expect_within_1_percent(double actual, double published, const char* what) {
  EXPECT_NEAR(actual / published, 1.0, 0.01) << what << ": " << actual << " vs " << published;
}

TEST(ModelPresets, Llama2_7bMatchesTheClosedForm) {
  const ModelConfig m = preset("llama2-7b");
  const std::int64_t h = 4096, ffn = 11008, vocab = 32000, layers = 32;
  const std::int64_t expected = 2 * vocab * h + layers * (4 * h * h + 3 * h * ffn + 2 * h) + h;
  EXPECT_EQ(parameter_count(m), expected);
  EXPECT_EQ(expected, 6738415616);
  EXPECT_EQ(active_parameter_count(m), expected);
  EXPECT_EQ(m.kv_channels, 128);
  EXPECT_EQ(m.max_position_embeddings, 4096);
}

TEST(ModelPresets, PublishedParameterCounts) {
  expect_within_1_percent(parameter_count(preset("llama2-13b")), 13.0e9, "llama2-13b");
  expect_within_1_percent(parameter_count(preset("llama2-70b")), 68.98e9, "llama2-70b");
  expect_within_1_percent(parameter_count(preset("llama3-8b")), 8.03e9, "llama3-8b");
  expect_within_1_percent(parameter_count(preset("llama3-70b")), 70.6e9, "llama3-70b");
  expect_within_1_percent(parameter_count(preset("llama3-405b")), 405e9, "llama3-405b");
  expect_within_1_percent(parameter_count(preset("gpt3-175b")), 175e9, "gpt3-175b");
  expect_within_1_percent(parameter_count(preset("mixtral-8x7b")), 46.7e9, "mixtral-8x7b total");
  expect_within_1_percent(active_parameter_count(preset("mixtral-8x7b")), 12.9e9, "mixtral-8x7b active");
  expect_within_1_percent(parameter_count(preset("mixtral-8x22b")), 141e9, "mixtral-8x22b total");
  expect_within_1_percent(active_parameter_count(preset("mixtral-8x22b")), 39e9, "mixtral-8x22b active");
}

// Narayanan et al. (SC'21) eq: P = 12 l h^2 (1 + 13/(12h) + (V + s)/(12 l h)); plus the final LayerNorm.
TEST(ModelPresets, MegatronFamilyFollowsThePaperFormula) {
  struct Row { const char* name; std::int64_t h; int layers; int heads; double billions; };
  const Row rows[] = {{"megatron-gpt-1.7b", 2304, 24, 24, 1.7},     {"megatron-gpt-3.6b", 3072, 30, 32, 3.6},
                      {"megatron-gpt-7.5b", 4096, 36, 32, 7.5},     {"megatron-gpt-18.4b", 6144, 40, 48, 18.4},
                      {"megatron-gpt-39.1b", 8192, 48, 64, 39.1},   {"megatron-gpt-76.1b", 10240, 60, 80, 76.1},
                      {"megatron-gpt-145.6b", 12288, 80, 96, 145.6}, {"megatron-gpt-310.1b", 16384, 96, 128, 310.1},
                      {"megatron-gpt-529.6b", 20480, 105, 128, 529.6}, {"megatron-gpt-1t", 25600, 128, 160, 1008}};
  for (const Row& row : rows) {
    const ModelConfig m = preset(row.name);
    EXPECT_EQ(m.hidden_size, row.h);
    EXPECT_EQ(m.num_layers, row.layers);
    EXPECT_EQ(m.num_attention_heads, row.heads);
    EXPECT_EQ(m.ffn_hidden_size, 4 * row.h);
    const std::int64_t h = row.h, l = row.layers, v = 51200, s = 2048;
    EXPECT_EQ(parameter_count(m), 12 * l * h * h + 13 * l * h + (v + s) * h + 2 * h) << row.name;
    EXPECT_NEAR(parameter_count(m) / 1e9 / row.billions, 1.0, 0.04) << row.name;  // the table rounds
  }
}

TEST(ModelPresets, Gpt3UsesGptConventions) {
  const ModelConfig m = preset("gpt3-175b");
  EXPECT_EQ(m.activation, Activation::gelu);
  EXPECT_EQ(m.normalization, Normalization::layernorm);
  EXPECT_FALSE(m.untie_embeddings_and_output_weights);
  EXPECT_FALSE(m.position_embedding_rope);
  EXPECT_TRUE(m.add_bias_linear);
  EXPECT_DOUBLE_EQ(m.hidden_dropout, 0.1);
  EXPECT_EQ(embedding_parameter_count(m), (50257 + 2048) * 12288LL);
}

TEST(ModelPresets, MixtralLayersAreAllMoe) {
  const ModelConfig m = preset("mixtral-8x7b");
  EXPECT_TRUE(m.is_moe());
  EXPECT_EQ(m.num_moe_layers(), 32);
  EXPECT_EQ(m.num_query_groups, 8);
  const std::int64_t h = 4096;
  const std::int64_t attention = 2 * h * h + 2 * h * 1024;
  EXPECT_EQ(layer_parameter_count(m, 0), attention + 8 * 3 * h * 14336 + 8 * h + 2 * h);
  ModelConfig every_other = m;
  every_other.moe.layer_freq = 2;
  EXPECT_EQ(every_other.num_moe_layers(), 16);
  EXPECT_FALSE(every_other.is_moe_layer(1));
  EXPECT_EQ(layer_parameter_count(every_other, 1), attention + 3 * h * 14336 + 2 * h);
}

TEST(ModelParameterGroups, SplitAsMegatronShardsThem) {
  const ModelConfig gpt = preset("gpt3-175b");  // biases, LayerNorm, tied, learned positions
  const std::int64_t h = 12288;
  const LayerParameterGroups dense = layer_parameter_groups(gpt, 0);
  EXPECT_EQ(dense.attention_weights, 4 * h * h);
  EXPECT_EQ(dense.attention_biases, 3 * h);             // QKV (column-parallel)
  EXPECT_EQ(dense.mlp_weights, 2 * h * 4 * h);
  EXPECT_EQ(dense.mlp_biases, 4 * h);                   // FC1 (column-parallel)
  EXPECT_EQ(dense.replicated, 2 * 2 * h + h + h);       // two LayerNorms, projection and FC2 biases
  EXPECT_EQ(dense.experts, 0);
  EXPECT_EQ(dense.tp_split() + dense.replicated, layer_parameter_count(gpt, 0));
  const EmbeddingAndOutputParameters ends = embedding_and_output_parameters(gpt, 50304);
  EXPECT_EQ(ends.word_embedding, 50304 * h);
  EXPECT_EQ(ends.position_embedding, 2048 * h);
  EXPECT_EQ(ends.output_projection, 0);  // tied
  EXPECT_EQ(ends.final_norm, 2 * h);

  const ModelConfig mixtral = preset("mixtral-8x7b");
  const LayerParameterGroups moe = layer_parameter_groups(mixtral, 0);
  EXPECT_EQ(moe.mlp_weights, 0);
  EXPECT_EQ(moe.experts, 8);
  EXPECT_EQ(moe.per_expert, 3 * 4096LL * 14336);
  EXPECT_EQ(moe.replicated, 2 * 4096 + 8 * 4096);  // two RMSNorms and the router
  EXPECT_EQ(embedding_and_output_parameters(mixtral, 32000).output_projection, 32000 * 4096LL);  // untied
}

TEST(ModelPresets, NamesAreCaseInsensitive) {
  ASSERT_TRUE(model_preset("LLaMA3-70B").has_value());
  EXPECT_EQ(model_preset("LLaMA3-70B")->name, "llama3-70b");
  EXPECT_FALSE(model_preset("llama9-7b").has_value());
  EXPECT_EQ(model_preset_names().size(), 19u);
}

// Nemotron-4 15B as NVIDIA's recipe has it (NVIDIA/dgxc-benchmarking v24.11.1 nemotron/nemotron4-15b-synth.yaml:
// squared-relu, no biases, untied embeddings, 8 query groups) against Parmar et al. 2024 (arXiv 2402.16819): 12.5
// billion non-embedding parameters. Squared ReLU is ungated, two matrices per MLP where SwiGLU has three.
TEST(ModelActivations, SquaredReluIsAnUngatedMlp) {
  ModelConfig m = preset("llama3-8b");
  m.num_layers = 32, m.hidden_size = 6144, m.ffn_hidden_size = 24576, m.num_attention_heads = 48;
  m.num_query_groups = 8, m.kv_channels = 128, m.vocab_size = 256000;
  m.activation = Activation::squared_relu;
  m.normalization = Normalization::layernorm;
  EXPECT_EQ(layer_parameter_groups(m, 0).mlp_weights, 2 * 6144LL * 24576);
  expect_within_1_percent(parameter_count(m) - embedding_parameter_count(m), 12.5e9, "non-embedding");
  m.activation = Activation::swiglu;
  EXPECT_EQ(layer_parameter_groups(m, 0).mlp_weights, 3 * 6144LL * 24576);
}

TEST(ModelEnums, StringsRoundTrip) {
  EXPECT_EQ(activation_from_string(to_string(Activation::gelu)), Activation::gelu);
  EXPECT_EQ(activation_from_string(to_string(Activation::squared_relu)), Activation::squared_relu);
  EXPECT_EQ(normalization_from_string(to_string(Normalization::rmsnorm)), Normalization::rmsnorm);
  EXPECT_EQ(attention_backend_from_string(to_string(AttentionBackend::unfused)), AttentionBackend::unfused);
  EXPECT_FALSE(activation_from_string("relu").has_value());
}

}  // namespace
}  // namespace twin
