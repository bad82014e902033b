// The per-layer family on its shipped scenario: a tight memory budget (llama2-13b, 8 x A100 40 GB,
// 8k tokens) where the best per-layer plan is faster than every uniform strategy that fits; parsing.
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "core/scenario.hpp"
#include "tests/strategies/per_layer/per_layer_fixture.hpp"
#include "tests/strategies/strategy_fixtures.hpp"
#include "strategies/families/families.hpp"
#include "strategies/per_layer/per_layer_search.hpp"

namespace twin {
namespace {

const std::string kScenario = std::string(TWIN_SOURCE_DIR) + "/scenarios/llama2-13b-8xA100-40GB-per-layer.json";

TEST(PerLayerScenario, ParsesAndRoundTrips) {
  const Scenario s = load_scenario(kScenario);
  EXPECT_TRUE(s.search.per_layer);
  EXPECT_EQ(parse_scenario(to_json(s), s.source), s);
  nlohmann::json off = to_json(s);
  off["search"]["per_layer"] = false;
  EXPECT_FALSE(parse_scenario(off, "off").search.per_layer);
  EXPECT_TRUE(per_layer_candidates(parse_scenario(off, "off"), builtin_profile()).empty());
}

// Under the built-in profile of 2026-11-21 the per-layer plan won this scenario by 1%; with measured and
// published A100 kernels and NCCL's latencies (2026-11-24) the best uniform strategy wins by 5%. What must hold
// is that the family plans within memory, ranks beside the uniform strategies, and mixes layer strategies.
TEST(PerLayerScenario, PerLayerPlanFitsRanksAndMixesLayerStrategies) {
  const Scenario s = load_scenario(kScenario);
  const std::vector<Candidate> ranked = search(s, builtin_profile(), plan_families(), {2, {}});
  const Candidate* best_uniform = nullptr;
  const Candidate* best_per_layer = nullptr;
  for (const Candidate& c : ranked) {
    if (!c.feasible) continue;
    if (c.family() == "uniform" && !best_uniform) best_uniform = &c;
    if (c.family() == "per-layer" && !best_per_layer) best_per_layer = &c;
  }
  ASSERT_NE(best_per_layer, nullptr);
  ASSERT_NE(best_uniform, nullptr);
  EXPECT_LT(best_per_layer->result.iteration_ns, 1.25 * best_uniform->result.iteration_ns);
  const double capacity = s.cluster.node_groups.front().gpu.memory_GiB * kGiB;
  EXPECT_LE(static_cast<double>(best_per_layer->memory.peak_bytes()), capacity);
  // Layers differ: the plan is not one strategy.
  const std::vector<LayerStrategy>& layers = best_per_layer->plan_as<PerLayerPlan>()->layers;
  EXPECT_NE(layers.front(), layers.back());
  // Re-evaluation gives the same time (the report and best.json use it).
  EXPECT_EQ(evaluate_again(s, builtin_profile(), *best_per_layer, false, nullptr).result.iteration_ns,
            best_per_layer->result.iteration_ns);
}

// A plan pinned by its scenario (strategy.per_layer, the object best.json's family_plan.detail holds): parsed
// without a search, written back, the only candidate, simulated as written; a layer strategy no stage can run and
// micro-batches that do not make the batch are refused at their JSON paths.
TEST(PerLayerScenario, APinnedPlanIsTheOnlyCandidate) {
  nlohmann::json doc = to_json(load_scenario(kScenario));  // 8 A100s, with a 4-layer Llama-shaped model
  doc["model"] = to_json(testing::make_scenario(testing::llama_shaped(4), 1, 1024, 16))["model"];
  doc["training"]["seq_length"] = 1024;
  doc["training"]["global_batch_size"] = 16;
  const PerLayerPlan plan =
      testing::per_layer_plan(2, 4, 4, {1, 3},
                              {{{2, false}, 1, Recompute::none}, {{4, false}, 0, Recompute::full},
                               {{1, false}, 3, Recompute::none}, {{2, false}, 0, Recompute::selective}});
  doc["strategy"] = {{"per_layer", plan.to_json()}};
  const Scenario pinned = parse_scenario(doc, "pinned.json");
  ASSERT_TRUE(pinned.per_layer_plan.has_value());
  EXPECT_FALSE(pinned.strategy.has_value());
  EXPECT_EQ(pinned.per_layer_plan->at, "/strategy/per_layer");
  EXPECT_EQ(parse_scenario(to_json(pinned), "pinned.json"), pinned);
  const std::vector<Candidate> ranked = search(pinned, builtin_profile(), plan_families(), {2, {}});
  ASSERT_EQ(ranked.size(), 1u);
  // The pin is the only candidate, whatever the search section asks for (here: per-layer plans too).
  nlohmann::json searching = doc;
  searching["search"]["per_layer"] = true;
  EXPECT_EQ(search(parse_scenario(searching, "pinned.json"), builtin_profile(), plan_families(), {2, {}}).size(), 1u);
  EXPECT_TRUE(ranked[0].feasible) << ranked[0].infeasible_reason;
  EXPECT_EQ(ranked[0].key(), plan.key());
  EXPECT_EQ(ranked[0].result.iteration_ns,
            evaluate_per_layer(pinned, builtin_profile(), plan, false).result.iteration_ns);

  const auto refusal = [&](const char* field, const nlohmann::json& value, int layer) {
    nlohmann::json bad = doc;
    nlohmann::json& at = layer < 0 ? bad["strategy"]["per_layer"] : bad["strategy"]["per_layer"]["layers"][layer];
    at[field] = value;
    try {
      search(parse_scenario(bad, "pinned.json"), builtin_profile(), plan_families(), {1, {}});
    } catch (const InputError& error) {
      EXPECT_EQ(error.file(), "pinned.json");
      return error.json_path();
    }
    return std::string("(accepted)");
  };
  EXPECT_EQ(refusal("group_size", 3, 1), "/strategy/per_layer/layers/1");  // 3 does not divide 4 GPUs
  EXPECT_EQ(refusal("zero_stage", 1, 1), "/strategy/per_layer/layers/1");  // tp 4 of 4: no data group to shard over
  EXPECT_EQ(refusal("num_micro_batches", 3, -1), "/strategy/per_layer/num_micro_batches");
  EXPECT_EQ(refusal("stage_num_layers", nlohmann::json::array({2, 3}), -1), "/strategy/per_layer/stage_num_layers");
}

TEST(PerLayerScenario, StrategySpaceHonoursDivisibilityAndDataParallelism) {
  const Scenario s = load_scenario(kScenario);
  // 8 GPUs, stage micro-batch 2: TP 4 and 8 (G / t divides 2), Ulysses 4 and 8; ZeRO 1/3 only with DP.
  for (const LayerStrategy& ls : layer_strategy_space(s, 1, 2)) {
    EXPECT_TRUE(ls.layout.group == 4 || ls.layout.group == 8) << to_string(ls);
    if (ls.layout.group == 8 && !ls.layout.ulysses) EXPECT_EQ(ls.zero_stage, 0);
  }
}

}  // namespace
}  // namespace twin
