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

TEST(ModelSupport, EachFeatureIsNamedAtItsOwnKey) {
  const std::vector<std::pair<std::string, std::function<void(ModelConfig&)>>> cases = {
      {"activation", [](ModelConfig& m) { m.activation = Activation::geglu; }},
      {"activation", [](ModelConfig& m) { m.activation = Activation::squared_relu; }},
      {"qk_layernorm", [](ModelConfig& m) { m.qk_layernorm = true; }},
      {"window_size", [](ModelConfig& m) { m.window_size = 4096; }},
      {"attention_sinks", [](ModelConfig& m) { m.attention_sinks = true; }},
      {"attention_softcap", [](ModelConfig& m) { m.attention_softcap = 50; }},
      {"final_logit_softcap", [](ModelConfig& m) { m.final_logit_softcap = 30; }},
      {"post_norms", [](ModelConfig& m) { m.post_norms = true; }},
      {"normalization", [](ModelConfig& m) { m.normalization = Normalization::layernorm; }},
      {"position_embedding_rope", [](ModelConfig& m) { m.position_embedding_rope = false; }},
      {"add_bias_linear", [](ModelConfig& m) { m.add_bias_linear = true; }},
      {"hidden_dropout", [](ModelConfig& m) { m.hidden_dropout = 0.1; }},
      {"attention_dropout", [](ModelConfig& m) { m.attention_dropout = 0.1; }},
      {"attention_backend", [](ModelConfig& m) { m.attention_backend = AttentionBackend::unfused; }},
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

TEST(ModelSupport, ExpertVariantsAreNamedUnderMoe) {
  ModelConfig shared = *model_preset("mixtral-8x7b");
  shared.moe.shared_expert_ffn_hidden_size = 1024;
  EXPECT_EQ(first_unsupported_feature(shared)->path, "moe/shared_expert_ffn_hidden_size");
  ModelConfig dense_first = *model_preset("mixtral-8x7b");
  dense_first.moe.first_dense_layers = 1;
  EXPECT_EQ(first_unsupported_feature(dense_first)->path, "moe/first_dense_layers");
}

}  // namespace
}  // namespace twin::exec
