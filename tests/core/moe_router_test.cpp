// The router's keys of model.moe (core/model.hpp MoeConfig): Megatron's defaults, its rules on their combinations,
// the keys written back only where they differ from the defaults, and the gates of the Hugging Face configs that
// state them (DeepSeek-V2/V3, Qwen's MoE models).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/hf_config.hpp"
#include "core/scenario.hpp"
#include "tests/core/hf_fixtures.hpp"
#include "tests/core/scenario_fixtures.hpp"

namespace twin {
namespace {

using nlohmann::json;

json mixtral_with(const json& moe_keys) {
  json s = testing::scenario_with_training(json::object());
  s["model"] = {{"preset", "mixtral-8x7b"}, {"moe", moe_keys}};
  return s;
}

TEST(MoeRouter, AbsentKeysAreMegatronsDefaultsAndAreNotWrittenBack) {
  const Scenario s = parse_scenario(mixtral_with(json::object()), "s.json");
  const MoeConfig& moe = s.model.moe;
  EXPECT_EQ(moe.router_score_function, RouterScore::softmax);
  EXPECT_FALSE(moe.router_pre_softmax);
  EXPECT_EQ(moe.router_topk_scaling_factor, 1.0);
  EXPECT_FALSE(moe.router_expert_bias);
  EXPECT_EQ(moe.router_bias_update_rate, 1e-3);
  const json written = to_json(s)["model"]["moe"];
  EXPECT_EQ(moe.aux_loss_coeff, 1e-2);  // twin's default, the Mixtral example's (Megatron's is 0)
  for (const char* key : {"router_score_function", "router_pre_softmax", "router_topk_scaling_factor",
                          "router_expert_bias", "router_bias_update_rate", "aux_loss_coeff"})
    EXPECT_FALSE(written.contains(key)) << key;
}

TEST(MoeRouter, DeepSeekV3sRouterReadsAndWritesBackAsItself) {
  const json keys = {{"router_score_function", "sigmoid"}, {"router_topk_scaling_factor", 2.5},
                     {"router_expert_bias", true}, {"router_bias_update_rate", 1e-4}, {"aux_loss_coeff", 1e-4}};
  const Scenario s = parse_scenario(mixtral_with(keys), "s.json");
  EXPECT_EQ(s.model.moe.router_score_function, RouterScore::sigmoid);
  EXPECT_TRUE(s.model.moe.router_expert_bias);
  EXPECT_EQ(s.model.moe.router_topk_scaling_factor, 2.5);
  EXPECT_EQ(s.model.moe.router_bias_update_rate, 1e-4);
  const json written = to_json(s);
  for (const auto& [key, value] : keys.items()) EXPECT_EQ(written["model"]["moe"][key], value) << key;
  EXPECT_EQ(parse_scenario(written, "again.json").model, s.model);
}

TEST(MoeRouter, RefusalsNameTheirPathAndMegatronsRule) {
  const auto refused_at = [](const json& document, const std::string& path, const std::string& says) {
    const std::string error = testing::scenario_error(document);
    EXPECT_EQ(error.rfind(path + ":", 0), 0u) << error;
    EXPECT_NE(error.find(says), std::string::npos) << error;
  };
  refused_at(mixtral_with({{"router_expert_bias", true}}), "/model/moe/router_expert_bias",
             "expected router_score_function sigmoid with router_expert_bias (Megatron: expert bias for aux-loss-free "
             "routing only supports the sigmoid score function)");
  refused_at(mixtral_with({{"router_score_function", "sigmoid"}, {"router_pre_softmax", true}}),
             "/model/moe/router_pre_softmax", "expected router_score_function softmax with router_pre_softmax");
  refused_at(mixtral_with({{"router_score_function", "sqrtsoftplus"}}), "/model/moe/router_score_function",
             "sigmoid");
  refused_at(mixtral_with({{"router_topk_scaling_factor", 0}}), "/model/moe/router_topk_scaling_factor",
             "expected a scaling factor");
  refused_at(mixtral_with({{"router_bias_update_rate", -1e-3}}), "/model/moe/router_bias_update_rate",
             "expected a bias update rate");
  refused_at(mixtral_with({{"router_expert_bias", "yes"}}), "/model/moe/router_expert_bias", "\"yes\"");
  refused_at(mixtral_with({{"aux_loss_coeff", 2}}), "/model/moe/aux_loss_coeff", "expected a loss weight in [0, 1]");
  // Group-limited routing, Mixtral's 8 experts and top-2: groups divide the experts, at most top_k of them chosen,
  // holding top_k experts.
  refused_at(mixtral_with({{"router_group_topk", 2}}), "/model/moe/router_group_topk",
             "expected router_num_groups beside router_group_topk");
  refused_at(mixtral_with({{"router_num_groups", 3}, {"router_group_topk", 1}}), "/model/moe/router_group_topk",
             "to divide num_experts 8");
  refused_at(mixtral_with({{"router_num_groups", 4}, {"router_group_topk", 3}}), "/model/moe/router_group_topk",
             "at most top_k 2");
  refused_at(mixtral_with({{"router_num_groups", 8}, {"router_group_topk", 1}}), "/model/moe/router_group_topk",
             "holding at least top_k experts (1 each)");
  const Scenario grouped = parse_scenario(mixtral_with({{"router_num_groups", 4}, {"router_group_topk", 2}}), "g.json");
  EXPECT_EQ(grouped.model.moe.router_num_groups, 4);
  EXPECT_EQ(parse_scenario(to_json(grouped), "again.json").model, grouped.model);
}

struct HfRouter {
  const char* file;
  RouterScore score;
  bool pre_softmax, expert_bias;
  double scale;
  int groups = 0, group_topk = 0;
};

// DeepSeek-V3: sigmoid, normalised, x2.5, noaux_tc's bias, 4 of 8 groups; V2: softmax not renormalised
// (norm_topk_prob false), x16, 3 of 8 groups; V2-Lite: the same at x1 without groups (greedy); Qwen1.5/2-MoE norm_topk_prob false, Qwen3-MoE true; Mixtral states none (renormalised).
TEST(MoeRouter, HuggingFaceGatesAreReadAsMegatronsRouter) {
  const HfRouter routers[] = {
      {"deepseek-v3-config.json", RouterScore::sigmoid, false, true, 2.5, 8, 4},
      {"deepseek-v2-config.json", RouterScore::softmax, true, false, 16.0, 8, 3},
      {"deepseek-v2-lite-config.json", RouterScore::softmax, true, false, 1.0},
      {"qwen1.5-moe-a2.7b-config.json", RouterScore::softmax, true, false, 1.0},
      {"qwen2-57b-a14b-config.json", RouterScore::softmax, true, false, 1.0},
      {"qwen3-30b-a3b-config.json", RouterScore::softmax, false, false, 1.0},
      {"mixtral-8x7b-config.json", RouterScore::softmax, false, false, 1.0},
  };
  for (const HfRouter& r : routers) {
    const MoeConfig moe = model_from_hf_config(testing::hf_fixture(r.file), r.file).moe;
    EXPECT_EQ(moe.router_score_function, r.score) << r.file;
    EXPECT_EQ(moe.router_pre_softmax, r.pre_softmax) << r.file;
    EXPECT_EQ(moe.router_expert_bias, r.expert_bias) << r.file;
    EXPECT_EQ(moe.router_topk_scaling_factor, r.scale) << r.file;
    EXPECT_EQ(moe.router_num_groups, r.groups) << r.file;
    EXPECT_EQ(moe.router_group_topk, r.group_topk) << r.file;
  }
  json v3 = testing::hf_fixture("deepseek-v3-config.json");
  v3["norm_topk_prob"] = false;
  EXPECT_THROW(model_from_hf_config(v3, "v3.json"), InputError) << "sigmoid scores unnormalised: not Megatron's";
  v3["norm_topk_prob"] = true;
  v3["scoring_func"] = "softmax";
  EXPECT_THROW(model_from_hf_config(v3, "v3.json"), InputError) << "noaux_tc's bias with softmax scores";
  v3["n_group"] = 7;  // 256 experts in 7 groups: refused as a scenario's groups are
  v3["scoring_func"] = "sigmoid";
  EXPECT_THROW(model_from_hf_config(v3, "v3.json"), InputError) << "groups that do not divide the experts";
  v3["n_group"] = 8;
  v3["scoring_func"] = "softmax";
  v3["topk_method"] = "greedy";
  EXPECT_EQ(model_from_hf_config(v3, "v3.json").moe.router_score_function, RouterScore::softmax);
}

}  // namespace
}  // namespace twin
