// Routing models: the busiest EP rank's load each gives, their published shapes, and model.moe.routing as read.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "core/model.hpp"
#include "core/moe_routing.hpp"

namespace twin {
namespace {

RoutingModel routing(RoutingDistribution distribution, double exponent = 0) {
  RoutingModel r;
  r.distribution = distribution;
  r.exponent = exponent;
  return r;
}

MoeConfig moe_with(RoutingModel model, int experts = 8, int top_k = 2) {
  MoeConfig moe;
  moe.num_experts = experts;
  moe.top_k = top_k;
  moe.ffn_hidden_size = 1024;
  moe.routing = std::move(model);
  return moe;
}

RoutingModel parse(const nlohmann::json& value, int experts = 8) {
  return parse_routing(JsonReader(value, "s.json", "/model/moe/routing"), experts, ".");
}

TEST(MoeRouting, BalancedIsTheMeanEverywhere) {
  const MoeConfig moe = moe_with({});
  EXPECT_EQ(expert_parallel_load(moe, 0, 4, 4096), (ExpertParallelLoad{1, 1}));
}

// The old key keeps its meaning: one expert at x times the mean, the rank holding it at MoeConfig::rank_imbalance.
TEST(MoeRouting, RoutingImbalanceIsAHotExpert) {
  MoeConfig moe = moe_with({});
  moe.routing.reset();
  moe.routing_imbalance = 1.5;
  EXPECT_EQ(effective_routing(moe).distribution, RoutingDistribution::hot_expert);
  const ExpertParallelLoad load = expert_parallel_load(moe, 0, 2, 4096);
  EXPECT_DOUBLE_EQ(load.rank_load, moe.rank_imbalance(2));
  EXPECT_DOUBLE_EQ(load.expert_load, 1.5);
}

// Forced balance (random logits) is even on average, but each micro-batch's busiest rank draws above the mean, the
// less so the more copies are drawn (a binomial's spread over its mean falls as one over the square root).
TEST(MoeRouting, ForcedBalanceDrawsAboveTheMeanByItsSpread) {
  const MoeConfig moe = moe_with(routing(RoutingDistribution::forced));
  EXPECT_NEAR(expert_parallel_load(moe, 0, 1, 4096).rank_load, 1.0, 1e-12);  // one rank gets every copy
  const double few = expert_parallel_load(moe, 0, 8, 1024).rank_load - 1;
  const double many = expert_parallel_load(moe, 0, 8, 4 * 1024).rank_load - 1;
  EXPECT_GT(few, 0.02);
  EXPECT_NEAR(few / many, 2.0, 0.3);
  // 8 experts of 128 copies each: the largest of 8 normals is about 1.42 standard deviations above the mean.
  EXPECT_NEAR(few, 1.42 * std::sqrt(128 * (1 - 1.0 / 8)) / 128, 0.03);
}

// Megatron's capacity factor: no expert takes more than the factor times its mean, the rest dropped; padded, every
// expert computes exactly its capacity. A balanced router under a factor of 1 or more drops nothing.
TEST(MoeRouting, CapacityClipsTheBusiestAndPaddingFillsEveryExpert) {
  MoeConfig hot = moe_with({});
  hot.routing.reset();
  hot.routing_imbalance = 2.0;
  hot.expert_capacity_factor = 1.25;
  EXPECT_DOUBLE_EQ(expert_parallel_load(hot, 0, 8, 4096).expert_load, 1.25);
  EXPECT_DOUBLE_EQ(expert_parallel_load(hot, 0, 8, 4096).rank_load, 1.25);  // one expert per rank
  MoeConfig zipf = moe_with(routing(RoutingDistribution::zipf, 1.0));
  const ExpertParallelLoad dropless = expert_parallel_load(zipf, 0, 4, 1e5);
  zipf.expert_capacity_factor = 1.5;
  const ExpertParallelLoad capped = expert_parallel_load(zipf, 0, 4, 1e5);
  EXPECT_LE(capped.expert_load, 4688.0 / 3125);  // each rank's 12,500 tokens: ceil(3,125 x 1.5) copies an expert
  EXPECT_LT(capped.rank_load, dropless.rank_load);
  EXPECT_LT(capped.expert_load, dropless.expert_load);
  MoeConfig balanced = moe_with({});
  balanced.expert_capacity_factor = 1.0;
  EXPECT_EQ(expert_parallel_load(balanced, 0, 4, 4096), (ExpertParallelLoad{1, 1}));
  balanced.pad_expert_input_to_capacity = true;
  balanced.expert_capacity_factor = 1.25;
  EXPECT_EQ(expert_parallel_load(balanced, 0, 4, 4096), (ExpertParallelLoad{1.25, 1.25}));
}

// Megatron's capacity in copies (get_capacity, apply_router_token_dropping): the factor times the mean, rounded up, and
// never above the tokens (no expert receives a token twice; padded, each computes them all). The simulator prices
// the same capacity twin execute drops at: a padded expert above the tokens computes the tokens, not the factor.
TEST(MoeRouting, TheCapacityIsMegatronsInCopiesAndAtMostTheTokens) {
  MoeConfig moe = moe_with({});
  EXPECT_EQ(expert_capacity(moe, 4096), std::nullopt);
  moe.expert_capacity_factor = 1.0;
  EXPECT_EQ(expert_capacity(moe, 4096), 1024);  // 4,096 tokens x top-2 over 8 experts
  moe.expert_capacity_factor = 1.1;
  EXPECT_EQ(expert_capacity(moe, 100), 28);     // ceil(25 x 1.1) = ceil(27.5)
  moe.expert_capacity_factor = 8.0;
  EXPECT_EQ(expert_capacity(moe, 100), 100);    // 200 above the tokens
  EXPECT_EQ(expert_capacity(moe, 0), 0);
  moe.pad_expert_input_to_capacity = true;
  EXPECT_EQ(expert_parallel_load(moe, 0, 4, 4096), (ExpertParallelLoad{4, 4}));  // experts / top-k, not 8
  moe.expert_capacity_factor = 1.1;
  const double per_rank = 4096.0 / 2 / 4, mean = per_rank * 2 / 8;
  EXPECT_DOUBLE_EQ(expert_parallel_load(moe, 0, 4, 4096).expert_load, std::ceil(mean * 1.1) / mean);
}

TEST(MoeRouting, SameInputsSameLoads) {
  const MoeConfig moe = moe_with(routing(RoutingDistribution::zipf, 1.0));
  EXPECT_EQ(expert_parallel_load(moe, 3, 4, 8192), expert_parallel_load(moe, 3, 4, 8192));
}

// A skewed router's busiest rank rises with the exponent, and spreading the experts over more ranks exposes more.
TEST(MoeRouting, ZipfSkewsTheBusiestRank) {
  const double mild = expert_parallel_load(moe_with(routing(RoutingDistribution::zipf, 0.5)), 0, 4, 1e6).rank_load;
  const double steep = expert_parallel_load(moe_with(routing(RoutingDistribution::zipf, 1.5)), 0, 4, 1e6).rank_load;
  EXPECT_GT(mild, 1.05);
  EXPECT_GT(steep, mild);
  const MoeConfig moe = moe_with(routing(RoutingDistribution::zipf, 1.0));
  EXPECT_GT(expert_parallel_load(moe, 0, 8, 1e6).rank_load, expert_parallel_load(moe, 0, 2, 1e6).rank_load);
}

// The trained routers carry the published busiest-expert share (Wang et al. 2024, Table 2) at any expert count.
TEST(MoeRouting, TrainedRoutersCarryThePublishedBusiestExpert) {
  for (int experts : {8, 64, 256}) {
    const std::vector<double> aux = expert_shares(routing(RoutingDistribution::aux_loss), experts, 0);
    const std::vector<double> free = expert_shares(routing(RoutingDistribution::loss_free), experts, 0);
    EXPECT_NEAR(aux[0] * experts, 1 + kAuxLossMaxViolation, 1e-6) << experts;
    EXPECT_NEAR(free[0] * experts, 1 + kLossFreeMaxViolation, 1e-6) << experts;
  }
  EXPECT_NEAR(zipf_exponent_for(8, 1.0), 0.0, 1e-9);
}

// Measured histograms price each layer by its own loads, where the run's experts were placed; a layer the run did
// not measure takes them all pooled.
TEST(MoeRouting, MeasuredHistogramsDifferByLayer) {
  RoutingModel measured = routing(RoutingDistribution::measured);
  measured.histograms = {{0, {100, 100, 100, 100}}, {1, {400, 0, 0, 0}}};
  const MoeConfig moe = moe_with(measured, 4, 1);
  EXPECT_NEAR(expert_parallel_load(moe, 0, 2, 1e8).rank_load, 1.0, 1e-3);
  EXPECT_NEAR(expert_parallel_load(moe, 1, 2, 1e8).rank_load, 2.0, 1e-3);
  EXPECT_NEAR(expert_parallel_load(moe, 1, 2, 1e8).expert_load, 4.0, 1e-3);
  EXPECT_NEAR(expert_shares(measured, 4, 7)[0], 500.0 / 800, 1e-12);
}

TEST(MoeRouting, ReadsAndWritesTheScenarioForm) {
  EXPECT_EQ(parse({{"distribution", "forced"}}).distribution, RoutingDistribution::forced);
  EXPECT_EQ(parse({{"distribution", "zipf"}, {"exponent", 1.2}}).exponent, 1.2);
  const nlohmann::json measured = {
      {"distribution", "measured"},
      {"histogram", {{{"layer", 2}, {"tokens_per_expert", {1, 2}}}, {{"layer", 2}, {"tokens_per_expert", {3, 0}}}}}};
  const RoutingModel r = parse(measured, 2);
  ASSERT_EQ(r.histograms.size(), 1u);
  EXPECT_EQ(r.histograms[0].tokens_per_expert, (std::vector<std::int64_t>{4, 2}));
  EXPECT_EQ(parse(routing_json(r), 2), r);
}

TEST(MoeRouting, ReadsARunsRankFile) {
  const std::filesystem::path folder = std::filesystem::path(::testing::TempDir()) / "moe_routing_test";
  std::filesystem::create_directories(folder);
  std::ofstream(folder / "rank0.json") << R"({"rank": 0, "expert_loads": [
      {"iteration": 1, "micro_batch": 0, "layer": 0, "tokens_per_expert": [3, 1]}]})";
  const nlohmann::json value = {{"distribution", "measured"}, {"histogram", "rank0.json"}};
  const RoutingModel r = parse_routing(JsonReader(value, "s.json", "/model/moe/routing"), 2, folder);
  EXPECT_EQ(r.histograms.at(0).tokens_per_expert, (std::vector<std::int64_t>{3, 1}));
}

TEST(MoeRouting, RefusesWhatItCannotPrice) {
  const auto refused = [](const nlohmann::json& value, const std::string& expected) {
    try {
      parse(value);
      ADD_FAILURE() << "accepted " << value.dump();
    } catch (const InputError& error) {
      EXPECT_NE(std::string(error.what()).find(expected), std::string::npos) << error.what();
    }
  };
  refused({{"distribution", "uniform"}}, "routing distribution");
  refused({{"distribution", "forced"}, {"exponent", 1}}, "only with distribution zipf");
  refused({{"distribution", "zipf"}}, "exponent");
  refused({{"distribution", "zipf"}, {"exponent", -1}}, "Zipf exponent");
  refused({{"distribution", "measured"}, {"histogram", {{{"layer", 0}, {"tokens_per_expert", {1, 2}}}}}},
          "expected 8 counts");
  refused({{"distribution", "measured"}, {"histogram", {{{"layer", 0}, {"tokens_per_expert", std::vector<int>(8)}}}}},
          "expected some tokens routed in layer 0");
  refused({{"distribution", "measured"}, {"histogram", "missing.json"}}, "readable histogram");
  // The columns of a run's rank file: one entry of counts per layer entry.
  const std::vector<int> eight = {1, 1, 1, 1, 1, 1, 1, 9};
  refused({{"distribution", "measured"},
           {"histogram", {{"layer", {0, 1}}, {"tokens_per_expert", nlohmann::json::array({eight})}}}},
          "expected one entry per layer entry (2), got 1");
  refused({{"distribution", "measured"}, {"histogram", {{"layer", {0}}, {"tokens_per_expert", {eight}}, {"rank", 0}}}},
          "rank");
}

}  // namespace
}  // namespace twin
