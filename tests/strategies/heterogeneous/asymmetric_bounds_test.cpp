// The heterogeneous family's work is bounded before it is spent: a plan's op count (its passes and its gradient
// rings, which grow with the square of the pipelines) and the layouts no plan could use, never built.
#include <fstream>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/scenario.hpp"
#include "cost/profile.hpp"
#include "strategies/heterogeneous/asymmetric_plan.hpp"
#include "strategies/heterogeneous/heterogeneous_search.hpp"
#include "strategies/validity.hpp"

namespace twin {
namespace {

Scenario mixed(std::int64_t global_batch, int a100_nodes) {
  nlohmann::json s = nlohmann::json::parse(
      std::ifstream(std::string(TWIN_SOURCE_DIR) + "/scenarios/mixed-h100-a100-llama2-13b.json"));
  s["training"]["global_batch_size"] = global_batch;
  s["cluster"]["nodes"][1]["count"] = a100_nodes;
  return parse_scenario(s, "mixed.json");
}

TEST(AsymmetricBounds, TheGradientRingsCountWithTheSquareOfThePipelines) {
  const Scenario scenario = mixed(32, 1);  // llama2-13b: 40 layers
  const std::int64_t one = asymmetric_op_count(scenario, Strategy{}, 256, 1);
  const std::int64_t two = asymmetric_op_count(scenario, Strategy{}, 256, 2);
  EXPECT_EQ(two - one, 42 * 4 * 2);  // (layers + 2) segments at most, a send and a receive per step and pipeline
  EXPECT_EQ(asymmetric_too_many_ops_reason(scenario, Strategy{}, 256, 200), std::nullopt);
  // 256 pipelines: 42 x 4 x 256 x 255 = 11.0 M ring ops, over the bound with a few micro-batches.
  const std::optional<std::string> reason = asymmetric_too_many_ops_reason(scenario, Strategy{}, 256, 256);
  ASSERT_TRUE(reason.has_value());
  EXPECT_NE(reason->find("its op graph would hold about 11.5 M ops (256 micro-batches x 40 layers, and a gradient "
                         "ring over 256 pipelines per segment), more than the limit of 8 M"),
            std::string::npos) << *reason;
}

TEST(AsymmetricBounds, APlanBeyondTheBoundIsRefusedBeforeItIsLowered) {
  const Scenario scenario = mixed(1 << 20, 1);
  AsymmetricPipeline pipeline{1, 1 << 20, {AsymmetricStage{{0, 1, 2, 3, 4, 5, 6, 7}, 8, 40}}};
  Strategy shared;
  shared.sequence_parallel = true;
  const Candidate c = evaluate_asymmetric_plan(scenario, builtin_profile(), shared, {pipeline}, false);
  EXPECT_FALSE(c.feasible);
  EXPECT_NE(c.infeasible_reason.find("its op graph would hold about"), std::string::npos) << c.infeasible_reason;
}

TEST(AsymmetricBounds, LayoutsNoPlanCouldUseAreNeverBuilt) {
  // 65,536 A100 nodes beside one H100 node: more TP groups than 32 micro-batches x 40 layers of stages.
  EXPECT_TRUE(heterogeneous_candidates(mixed(32, 65536), builtin_profile(), 1).empty());
  // A million micro-batches: every plan's graph beyond the bound, whatever its layout.
  EXPECT_TRUE(heterogeneous_candidates(mixed(1 << 20, 1), builtin_profile(), 1).empty());
}

}  // namespace
}  // namespace twin
