// The scenario's "cost" section: prices for every GPU of the cluster, its errors at their JSON paths, and what the
// cluster's hour costs (a mixed cluster priced per GPU kind).
#include "core/scenario_cost.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/scenario.hpp"
#include "tests/core/scenario_error_path.hpp"

namespace twin {
namespace {

using nlohmann::json;
using testing::error_path;

json mixed_with_cost(const json& cost) {
  json d = json::parse(R"({
    "model": {"preset": "llama2-7b"}, "training": {"seq_length": 4096, "global_batch_size": 64},
    "cluster": {"nodes": [{"count": 2, "gpu": "H100-SXM-80GB", "gpus_per_node": 8, "nics": {"count": 8, "bandwidth_Gbps": 400}},
                          {"count": 1, "gpu": "A100-SXM-80GB", "gpus_per_node": 8, "nics": {"count": 8, "bandwidth_Gbps": 200}}]}})");
  d["cost"] = cost;
  return d;
}

std::optional<CostConfig> parse_cost(const json& document) {
  const Scenario scenario = parse_scenario(document, "s.json");  // checks the section too
  return parse_cost_section(JsonReader(document, "s.json"), scenario.cluster);
}

TEST(ScenarioCost, PricesEachGpuKindAndTheClusterHour) {
  const json d = mixed_with_cost(json::parse(
      R"({"currency": "EUR", "price_per_gpu_hour": 2.0, "price_per_gpu_hour_by_gpu": {"a100-sxm-80gb": 1.25},
          "tokens_to_train": 1e12})"));
  const std::optional<CostConfig> cost = parse_cost(d);
  ASSERT_TRUE(cost);
  EXPECT_EQ(cost->currency, "EUR");
  ASSERT_EQ(cost->price_per_gpu_hour_by_gpu.size(), 1u);
  EXPECT_EQ(cost->price_per_gpu_hour_by_gpu[0].first, "A100-SXM-80GB");  // the preset's own spelling
  EXPECT_DOUBLE_EQ(*cost->tokens_to_train, 1e12);
  const Scenario scenario = parse_scenario(d, "s.json");
  EXPECT_DOUBLE_EQ(cluster_price_per_hour(*cost, scenario.cluster), 16 * 2.0 + 8 * 1.25);
}

TEST(ScenarioCost, AbsentSectionIsNoCost) {
  json d = mixed_with_cost(nullptr);
  d.erase("cost");
  EXPECT_FALSE(parse_cost(d));
}

TEST(ScenarioCost, ErrorsNameTheJsonPath) {
  std::string message;
  EXPECT_EQ(error_path(mixed_with_cost(json::parse(R"({"price_per_gpu_hour_by_gpu": {"H100-SXM-80GB": 2}})")), message),
            "/cost");
  EXPECT_NE(message.find("a price for \"A100-SXM-80GB\""), std::string::npos) << message;
  EXPECT_EQ(error_path(mixed_with_cost(json::parse(R"({"price_per_gpu_hour": 2, "currency": "usd"})")), message),
            "/cost/currency");
  EXPECT_NE(message.find("three capital letters"), std::string::npos) << message;
  EXPECT_EQ(error_path(mixed_with_cost(json::parse(R"({"price_per_gpu_hour": -1})")), message), "/cost/price_per_gpu_hour");
  EXPECT_EQ(error_path(mixed_with_cost(json::parse(R"({"price_per_gpu_hour": 1, "price_per_gpu_hour_by_gpu": {"H1OO": 2}})")),
                       message),
            "/cost/price_per_gpu_hour_by_gpu/H1OO");
  EXPECT_NE(message.find("expected a key naming a GPU preset"), std::string::npos) << message;
  EXPECT_EQ(error_path(mixed_with_cost(json::parse(R"({"price_per_gpu_hour": 1, "tokens_to_train": 0})")), message),
            "/cost/tokens_to_train");
  EXPECT_EQ(error_path(mixed_with_cost(json::parse(R"({"price_per_gpu_hour": 1, "price": 2})")), message), "/cost/price");
  EXPECT_NE(message.find("unknown key 'price'"), std::string::npos) << message;
}

}  // namespace
}  // namespace twin
