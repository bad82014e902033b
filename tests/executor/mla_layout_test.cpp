// MLA's weights as twin execute lays them out (executor/parameters.cpp, the parameter units its block reads) are the
// ones core counts (layer_parameter_groups, whose whole count core's tests hold within 0.5% of DeepSeek-V3's
// published 671B: tests/core/hf_config_families_test.cpp): for DeepSeek-V3 as its published config.json has it (4 of
// its layers: 3 dense, then an MoE one) and with the query projection direct (q_lora_rank 0, DeepSeek-V2-Lite's
// form); each weight [in, out] at DeepSeek-V3's widths. Under TP the layout is refused.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/hf_config.hpp"
#include "executor/mla_layout.hpp"
#include "executor/parameters.hpp"
#include "strategies/validity.hpp"
#include "tests/core/hf_fixtures.hpp"
#include "tests/strategies/strategy_fixtures.hpp"

namespace twin::exec {
namespace {

ModelConfig deepseek_v3() {
  nlohmann::json config = testing::hf_fixture("deepseek-v3-config.json");
  config["num_nextn_predict_layers"] = 0;  // the main model, as transformers loads it
  config["num_hidden_layers"] = 4;         // its first dense layers and one MoE layer
  return model_from_hf_config(config, "deepseek-v3-config.json");
}

std::vector<ParameterUnitLayout> units_of(const ModelConfig& m, int tp) {
  const Scenario scenario = testing::make_scenario(m, 1, 1024, 8);
  Strategy strategy = testing::make_strategy(tp, 1, 1, false);
  if (auto reason = complete_strategy(scenario, strategy)) throw std::runtime_error(*reason);
  return plan_parameter_units(scenario, strategy, placement_of(strategy, 0), 7);
}

const ParameterUnitLayout& unit(const std::vector<ParameterUnitLayout>& units, std::int32_t id) {
  return *std::find_if(units.begin(), units.end(), [&](const ParameterUnitLayout& u) { return u.id == id; });
}

std::vector<std::string> mla_tensor_names(const ParameterUnitLayout& u) {
  std::vector<std::string> out;
  for (const WeightTensor& w : u.tensors) out.push_back(w.name);
  return out;
}

// Each layer's unit (and an MoE layer's experts unit) holds exactly core's count of the layer.
void expect_core_counts(const ModelConfig& m, const std::vector<ParameterUnitLayout>& units) {
  for (int l = 0; l < m.num_layers; ++l) {
    const LayerParameterGroups g = layer_parameter_groups(m, l);
    EXPECT_EQ(unit(units, l).elements, g.tp_split() + g.replicated) << "layer " << l;
    if (m.is_moe_layer(l)) EXPECT_EQ(unit(units, expert_unit_of(l)).elements, g.experts * g.per_expert);
  }
}

TEST(MlaLayout, DeepSeekV3sUnitsHoldCoresCount) {
  const ModelConfig m = deepseek_v3();
  ASSERT_TRUE(m.mla.enabled());
  const auto units = units_of(m, 1);
  EXPECT_EQ(mla_tensor_names(unit(units, 0)),
            (std::vector<std::string>{"L0.input_norm", "L0.q_down", "L0.q_norm", "L0.q_up", "L0.kv_down", "L0.kv_norm",
                                      "L0.kv_up", "L0.proj", "L0.mlp_norm", "L0.fc1", "L0.fc2"}));
  const ParameterUnitLayout& l0 = unit(units, 0);
  const auto shape = [&](OpRole role) { return std::pair{l0.tensor(role).rows, l0.tensor(role).cols}; };
  EXPECT_EQ(shape(OpRole::mla_q_down), (std::pair<std::int64_t, std::int64_t>{7168, 1536}));
  EXPECT_EQ(shape(OpRole::mla_q_norm), (std::pair<std::int64_t, std::int64_t>{1, 1536}));
  EXPECT_EQ(shape(OpRole::mla_q_up), (std::pair<std::int64_t, std::int64_t>{1536, 128 * 192}));
  EXPECT_EQ(shape(OpRole::mla_kv_down), (std::pair<std::int64_t, std::int64_t>{7168, 512 + 64}));
  EXPECT_EQ(shape(OpRole::mla_kv_norm), (std::pair<std::int64_t, std::int64_t>{1, 512}));
  EXPECT_EQ(shape(OpRole::mla_kv_up), (std::pair<std::int64_t, std::int64_t>{512, 128 * (128 + 128)}));
  EXPECT_EQ(shape(OpRole::attention_projection), (std::pair<std::int64_t, std::int64_t>{128 * 128, 7168}));
  EXPECT_TRUE(l0.tensor(OpRole::mla_kv_norm).tp_replicated);
  EXPECT_EQ(l0.tensor(OpRole::mla_q_norm).init_stddev, 0.0f);  // ones, as every norm weight starts
  expect_core_counts(m, units);
  // The shape the block runs is the layout's.
  const MlaShape s = mla_shape(m, 1, 4096);
  EXPECT_EQ(s.q_width(), l0.tensor(OpRole::mla_q_up).cols);
  EXPECT_EQ(s.ckv_width(), l0.tensor(OpRole::mla_kv_down).cols);
  EXPECT_EQ(s.kv_width(), l0.tensor(OpRole::mla_kv_up).cols);
  EXPECT_EQ(s.o_width(), l0.tensor(OpRole::attention_projection).rows);
}

TEST(MlaLayout, DirectQueryProjectionIsCountedToo) {
  ModelConfig m = deepseek_v3();
  m.mla.q_lora_rank = 0;
  const auto units = units_of(m, 1);
  const ParameterUnitLayout& l0 = unit(units, 0);
  EXPECT_EQ(l0.find(OpRole::mla_q_down, WeightPart::weight), nullptr);
  EXPECT_EQ(l0.find(OpRole::mla_q_norm, WeightPart::weight), nullptr);
  EXPECT_EQ(l0.tensor(OpRole::mla_q_up).rows, 7168);
  expect_core_counts(m, units);
}

TEST(MlaLayout, TensorParallelismIsRefused) {
  try {
    units_of(deepseek_v3(), 2);
    FAIL() << "MLA laid out under TP 2";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("multi-latent attention under tensor parallelism"), std::string::npos)
        << error.what();
  }
}

TEST(MlaLayout, AModelWithoutMlaIsRefused) {
  ModelConfig m = deepseek_v3();
  m.mla = MlaConfig{};
  EXPECT_THROW(mla_shape(m, 1, 128), std::invalid_argument);
}

}  // namespace
}  // namespace twin::exec
