// strategy.recompute_modules (Megatron's --recompute-modules): read in order, written back, and refused with the JSON
// path of the element at fault: an unknown name, a name twice, a module the model does not have, the list beside a
// granularity other than selective, moe beside the overlapped EP schedule.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/scenario.hpp"
#include "tests/core/scenario_error_path.hpp"

namespace twin {
namespace {

nlohmann::json scenario_with(const nlohmann::json& modules, const std::string& recompute = "selective",
                             bool moe = true) {
  nlohmann::json s = {
      {"model", {{"preset", "llama2-7b"}, {"num_layers", 4}}},
      {"training", {{"seq_length", 4096}, {"global_batch_size", 8}}},
      {"cluster", {{"nodes", {{{"count", 1}, {"gpu", "H100-SXM-80GB"}, {"gpus_per_node", 8}}}}}},
      {"strategy", {{"tensor_model_parallel_size", 1}, {"recompute", recompute}, {"recompute_modules", modules}}}};
  if (moe) s["model"]["moe"] = {{"num_experts", 8}, {"top_k", 2}, {"ffn_hidden_size", 1024}, {"first_dense_layers", 1}};
  return s;
}

std::string path_of(const nlohmann::json& document) {
  std::string message;
  return testing::error_path(document, message);
}

TEST(RecomputeModulesParse, ReadInOrderAndWrittenBack) {
  const Scenario s = parse_scenario(scenario_with({"mlp", "moe_act", "layernorm"}), "s.json");
  ASSERT_TRUE(s.strategy);
  using enum RecomputeModule;
  EXPECT_EQ(s.strategy->recompute_modules, (std::vector<RecomputeModule>{mlp, moe_act, layernorm}));
  EXPECT_EQ(recomputed_modules(*s.strategy), module_bit(mlp) | module_bit(moe_act) | module_bit(layernorm));
  EXPECT_NE(s.strategy->key().find(".rc-selective-mlp+moe_act+layernorm."), std::string::npos) << s.strategy->key();
  const Scenario again = parse_scenario(to_json(s), "again.json");
  EXPECT_EQ(again.strategy->recompute_modules, s.strategy->recompute_modules);
  // Without the key, selective is Megatron's default: core attention.
  nlohmann::json plain = scenario_with({"mlp"});
  plain["strategy"].erase("recompute_modules");
  EXPECT_EQ(recomputed_modules(*parse_scenario(plain, "s.json").strategy), module_bit(core_attn));
}

TEST(RecomputeModulesParse, RefusedWithTheElementsPath) {
  EXPECT_EQ(path_of(scenario_with({"mlp", "attention"})), "/strategy/recompute_modules/1");
  EXPECT_EQ(path_of(scenario_with({"mlp", "mlp"})), "/strategy/recompute_modules/1");
  EXPECT_EQ(path_of(scenario_with(nlohmann::json::array())), "/strategy/recompute_modules");
  EXPECT_EQ(path_of(scenario_with({"mla_up_proj"})), "/strategy/recompute_modules/0");  // no MLA
  EXPECT_EQ(path_of(scenario_with({"layernorm", "moe_act"}, "selective", false)), "/strategy/recompute_modules/1");
  EXPECT_EQ(path_of(scenario_with({"shared_experts"})), "/strategy/recompute_modules/0");  // no shared experts
  EXPECT_EQ(path_of(scenario_with({"mlp"}, "none")), "/strategy/recompute_modules");
  EXPECT_EQ(path_of(scenario_with({"mlp"}, "full")), "/strategy/recompute_modules");
  nlohmann::json all_moe = scenario_with({"mlp"});
  all_moe["model"]["moe"]["first_dense_layers"] = 0;
  EXPECT_EQ(path_of(all_moe), "/strategy/recompute_modules/0");  // every layer MoE: mlp repeats nothing
  nlohmann::json overlapped = scenario_with({"moe"});
  overlapped["framework"] = {{"overlap_moe_expert_parallel_comm", true}};
  std::string message;
  EXPECT_EQ(testing::error_path(overlapped, message), "/strategy/recompute_modules/0");
  EXPECT_NE(message.find("overlap_moe_expert_parallel_comm"), std::string::npos) << message;
  EXPECT_EQ(path_of(scenario_with({"moe", "moe_act", "layernorm", "mlp", "core_attn"})), "(no error)");
}

}  // namespace
}  // namespace twin
