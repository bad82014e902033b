// The published MoE rows (tests/validation/moe_rows.json): every row reads as the page states it, its routing
// force-balanced (the page's footnote for dropless runs) or, for 25.09's token-drop run, auxiliary-loss routing at its
// recipe's capacity, its experts spread over EP, and the iteration time its figure implies.
#include <gtest/gtest.h>

#include <map>

#include "validation/published_table.hpp"

namespace twin {
namespace {

TEST(MoeRows, ReadAsPublished) {
  const PublishedTable table = load_published_table(std::string(TWIN_SOURCE_DIR) + "/tests/validation/moe_rows.json");
  ASSERT_EQ(table.rows.size(), 17u);  // 16 of Megatron-Bridge, NeMo AutoModel's Qwen3 MoE 30B since 2026-12-07
  const std::string token_drop = "mb2509_qwen3_235b_a22b_256h100_fp8";  // the page's "(tokendrop)" run
  std::map<std::string, const PublishedRow*> by_id;
  for (const PublishedRow& row : table.rows) {
    by_id[row.id] = &row;
    ASSERT_TRUE(row.scenario.model.is_moe()) << row.id;
    ASSERT_TRUE(row.scenario.model.moe.routing.has_value()) << row.id;
    EXPECT_EQ(row.scenario.model.moe.routing->distribution,
              row.id == token_drop ? RoutingDistribution::aux_loss : RoutingDistribution::forced)
        << row.id;
    EXPECT_EQ(row.scenario.model.moe.expert_capacity_factor.has_value(), row.id == token_drop) << row.id;
    ASSERT_TRUE(row.scenario.strategy.has_value()) << row.id;
    EXPECT_GT(row.scenario.strategy->expert_model_parallel_size, 1) << row.id;
  }
  // Qwen3 235B-A22B on 256 H100 (26.04.01): 8192 sequences of 4096 tokens / (1712 tokens/s per GPU x 256 GPUs).
  const PublishedRow& qwen = *by_id.at("mb260401_qwen3_235b_a22b_256h100_fp8");
  EXPECT_NEAR(qwen.published_iteration_s, 8192.0 * 4096 / (1712.0 * 256), 0.01);
  EXPECT_EQ(qwen.scenario.model.moe.num_experts, 128);
  EXPECT_EQ(qwen.scenario.model.num_layers, 94);
  // Qwen3 235B-A22B on 256 H100 (25.11, dropless; 25.09, token drop at capacity 1.0, padded): 2048 sequences.
  EXPECT_NEAR(by_id.at("mb2511_qwen3_235b_a22b_256h100_fp8")->published_iteration_s, 2048.0 * 4096 / (1575.0 * 256),
              0.01);
  EXPECT_EQ(by_id.at(token_drop)->scenario.model.moe.expert_capacity_factor, 1.0);
  EXPECT_TRUE(by_id.at(token_drop)->scenario.model.moe.pad_expert_input_to_capacity);
  // DeepSeek-V3 on 1,024 H100 (25.09): 8192 x 4096 / (1297 x 1024), its recipe's recompute modules and MTP depth.
  const PublishedRow& deepseek = *by_id.at("mb2509_deepseek_v3_1024h100_fp8");
  EXPECT_NEAR(deepseek.published_iteration_s, 8192.0 * 4096 / (1297.0 * 1024), 0.01);
  EXPECT_EQ(deepseek.scenario.strategy->recompute_modules,
            (std::vector<RecomputeModule>{RecomputeModule::mla_up_proj, RecomputeModule::mlp}));
  EXPECT_EQ(deepseek.scenario.model.mtp_num_layers, 1);
  // GPT-OSS 120B: its recipe's layernorm and moe_act recompute.
  EXPECT_EQ(by_id.at("mb2604_gpt_oss_120b_64h100_bf16")->scenario.strategy->recompute_modules,
            (std::vector<RecomputeModule>{RecomputeModule::layernorm, RecomputeModule::moe_act}));
}

}  // namespace
}  // namespace twin
