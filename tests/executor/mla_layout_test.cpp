// MLA's weights as the executor's block holds them (executor/mla_layout.hpp) are the ones the memory model counts
// (core's layer_parameter_groups), for DeepSeek-V3 as its published config.json has it (whose whole count core's
// tests hold within 0.5% of the published 671B: tests/core/hf_config_families_test.cpp) and with the query
// projection direct (q_lora_rank 0, DeepSeek-V2-Lite's form); the shape's widths are DeepSeek-V3's.
#include <stdexcept>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/hf_config.hpp"
#include "executor/mla_layout.hpp"
#include "tests/core/hf_fixtures.hpp"

namespace twin::exec {
namespace {

ModelConfig deepseek_v3() {
  nlohmann::json config = testing::hf_fixture("deepseek-v3-config.json");
  config["num_nextn_predict_layers"] = 0;  // the main model, as transformers loads it
  return model_from_hf_config(config, "deepseek-v3-config.json");
}

// Core's count of a layer's attention: its weights and what every TP rank holds whole, less the layer's two norms.
std::int64_t counted_attention(const ModelConfig& m) {
  const LayerParameterGroups g = layer_parameter_groups(m, 0);
  return g.attention_weights + g.replicated - 2 * m.hidden_size;
}

TEST(MlaLayout, DeepSeekV3sWeightsAreTheCountedOnes) {
  const ModelConfig m = deepseek_v3();
  const MlaShape s = mla_shape(m, 1, 4096);
  EXPECT_EQ(s.q_head(), 192);
  EXPECT_EQ(s.v, 128);
  EXPECT_EQ(s.ckv_width(), 512 + 64);
  const MlaWeightSizes w = mla_weight_sizes(s);
  EXPECT_EQ(w.q_down, 7168 * 1536);
  EXPECT_EQ(w.q_up, 1536 * 128 * 192);
  EXPECT_EQ(w.kv_down, 7168 * 576);
  EXPECT_EQ(w.kv_up, 512 * 128 * 256);
  EXPECT_EQ(w.total() + s.o_width() * s.hidden, counted_attention(m));
}

TEST(MlaLayout, DirectQueryProjectionIsCountedToo) {
  ModelConfig m = deepseek_v3();
  m.mla.q_lora_rank = 0;
  const MlaWeightSizes w = mla_weight_sizes(mla_shape(m, 1, 128));
  EXPECT_EQ(w.q_down + w.q_norm, 0);
  EXPECT_EQ(w.q_up, 7168 * 128 * 192);
  EXPECT_EQ(w.total() + 128 * 128 * 7168, counted_attention(m));
}

TEST(MlaLayout, AModelWithoutMlaIsRefused) {
  ModelConfig m = deepseek_v3();
  m.mla = MlaConfig{};
  EXPECT_THROW(mla_shape(m, 1, 128), std::invalid_argument);
}

}  // namespace
}  // namespace twin::exec
