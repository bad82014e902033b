// A hot-switching plan read back from its best.json: the phases the search chose come back, the graph the
// commands lower is the one the simulator priced, and a file whose phases do not follow from its scenario
// is refused at the JSON path at fault; a scenario pinning the plan (strategy.hot_switch) simulates it alone. Also
// what running a phase needs: its packs, whether two phases share a layout, packed attention priced as its
// sequences.
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "cost/profile.hpp"
#include "reports/best_plan.hpp"
#include "strategies/families/families.hpp"
#include "strategies/families/plan_graphs.hpp"
#include "strategies/hot_switch/hot_switch_plan.hpp"
#include "strategies/hot_switch/hot_switch_plan_file.hpp"
#include "strategies/hot_switch/hot_switch_resharding.hpp"
#include "strategies/hot_switch/hot_switch_search.hpp"
#include "strategies/hot_switch/hot_switch_workload.hpp"
#include "tests/strategies/hot_switch/hot_switch_fixture.hpp"

namespace twin {
namespace {

using testing::one_gpu_scenario;
using testing::plan_document;

std::string error_path(const nlohmann::json& document) {
  try {
    const Plan plan = parse_plan(document, "best.json");
    plan_graphs(plan, "best.json");
  } catch (const InputError& error) {
    return error.json_path();
  }
  return "(accepted)";
}

TEST(HotSwitchPacks, GreedyPacksListTheirSequencesAndPaddingPacksAreFull) {
  const std::vector<std::vector<std::int64_t>> packs = greedy_packs({1, 2, 3, 4, 5}, 6);
  EXPECT_EQ(packs, (std::vector<std::vector<std::int64_t>>{{5, 1}, {4, 2}, {3}}));
  const std::vector<SeqLengthCount> batch = {{1024, 5}, {4096, 1}};
  const PhaseWorkload all = pack_range(batch, 0, 4096);
  EXPECT_EQ(all.packs, 3);  // 4096 | 4 x 1024 | 1024
  const auto padded = phase_packs(batch, all, 4);
  ASSERT_EQ(padded.size(), 4u);
  EXPECT_EQ(padded[0], (std::vector<std::int64_t>{4096}));
  EXPECT_EQ(padded[1], (std::vector<std::int64_t>{1024, 1024, 1024, 1024}));
  EXPECT_EQ(padded[2], (std::vector<std::int64_t>{1024}));
  EXPECT_EQ(padded[3], (std::vector<std::int64_t>{4096}));
}

TEST(HotSwitchLayout, MicroBatchAndRecomputeKeepTheLayoutParallelismAndZeroDoNot) {
  Strategy a;
  Strategy b = a;
  b.micro_batch_size = 4;
  b.recompute = Recompute::full;
  b.num_micro_batches = 3;
  EXPECT_TRUE(same_parameter_layout(a, b));
  Strategy c = a;
  c.tensor_model_parallel_size = 2;
  EXPECT_FALSE(same_parameter_layout(a, c));
  Strategy d = a;
  d.zero_stage = 1;
  EXPECT_FALSE(same_parameter_layout(a, d));
}

TEST(HotSwitchAttention, PackedRowsArePricedAsTheirSequencesCausalSquares) {
  // A row of 4 sequences of 1,024 in 4,096 tokens: a quarter of one causal 4,096 sequence's scores.
  AttentionShape one{1, 32, 32, 4096, 4096, 128};
  AttentionShape packed = one;
  packed.seq_kv = 1024;
  packed.packed = true;
  const double whole = one.seq_q * one.seq_kv * attention_score_fraction(one);
  EXPECT_DOUBLE_EQ(packed.seq_q * packed.seq_kv * attention_score_fraction(packed), whole / 4);
  // Not packed, a shorter key length is a context-parallel split (queries the last of the keys).
  AttentionShape split{1, 32, 32, 1024, 4096, 128};
  EXPECT_DOUBLE_EQ(attention_score_fraction(split), 1.0 - 1024.0 / 8192);
}

TEST(HotSwitchPlanFile, TheSearchedPhasesAndGraphComeBackFromBestJson) {
  const Scenario scenario = one_gpu_scenario();
  const nlohmann::json document = plan_document(scenario, "hot-switch:");
  const Plan plan = parse_plan(document, "best.json");
  const PlanGraphs lowered = plan_graphs(plan, "best.json");
  EXPECT_EQ(lowered.family(), "hot-switch");
  EXPECT_EQ(lowered.key, document.at("family_plan").at("key"));
  ASSERT_EQ(lowered.parts.size(), document.at("family_plan").at("detail").at("phases").size());
  ASSERT_EQ(lowered.graph.classes.size(), lowered.parts.size());  // one GPU: one class per phase
  // The graph the simulator priced: best.json names as many ops per class.
  for (std::size_t c = 0; c < lowered.graph.classes.size(); ++c)
    EXPECT_EQ(lowered.graph.classes[c].size(), document.at("rank_classes").at(c).at("ops").size()) << "class " << c;
  std::int64_t tokens = 0;
  for (std::size_t p = 0; p < lowered.parts.size(); ++p) {
    const PlanPart& part = lowered.parts[p];
    EXPECT_EQ(part.class_of_rank, std::vector<int>{static_cast<int>(p)});
    EXPECT_EQ(static_cast<std::int64_t>(part.packs.size()), part.scenario.training.global_batch_size);
    EXPECT_TRUE(same_parameter_layout(part.strategy, plan.strategy));
    tokens += part.tokens();
  }
  EXPECT_EQ(lowered.tokens_per_step(), tokens);
  // Same layout: no separate gradient accumulation; a handoff orders the phases.
  int handoffs = 0;
  for (const RankClass& rc : lowered.graph.classes)
    for (OpIndex i = 0; i < rc.size(); ++i) {
      EXPECT_FALSE(rc.op(i).kind == OpKind::elementwise && rc.op(i).role == OpRole::none) << op_name(rc.op(i));
      handoffs += rc.op(i).role == OpRole::phase_handoff;
    }
  EXPECT_EQ(handoffs, 2 * (static_cast<int>(lowered.parts.size()) - 1));
  // The throughput is the simulator's for the predicted time.
  const double predicted_s = document.at("predicted").at("iteration_time_s");
  EXPECT_NEAR(lowered.throughput(predicted_s).mfu, document.at("predicted").at("mfu").get<double>(), 1e-9);
}

TEST(HotSwitchPlanFile, AStaticPackedPlanIsOnePartOfPacks) {
  const Scenario scenario = one_gpu_scenario();
  const Plan plan = parse_plan(plan_document(scenario, "static-packed:"), "best.json");
  const PlanGraphs lowered = plan_graphs(plan, "best.json");
  ASSERT_EQ(lowered.parts.size(), 1u);
  EXPECT_EQ(lowered.parts[0].scenario.training.seq_length, 4096);
  EXPECT_EQ(lowered.parts[0].packs.front(), std::vector<std::int64_t>{4096});
  bool packed = false;
  for (OpIndex i = 0; i < lowered.graph.classes[0].size(); ++i)
    packed |= lowered.graph.classes[0].op(i).attention.packed;
  EXPECT_TRUE(packed);  // the 1,024-token sequences share rows
}

TEST(HotSwitchPlanFile, PhasesThatDoNotFollowFromTheScenarioAreRefusedWhereTheyAre) {
  const nlohmann::json good = plan_document(one_gpu_scenario(), "hot-switch:");
  const auto with = [&](const std::string& pointer, const nlohmann::json& value) {
    nlohmann::json changed = good;
    changed[nlohmann::json::json_pointer(pointer)] = value;
    return error_path(changed);
  };
  const std::string phase0 = "/family_plan/detail/phases/0";
  EXPECT_EQ(with(phase0 + "/sequences", 11), phase0 + "/sequences");
  EXPECT_EQ(with(phase0 + "/max_length", 2048), phase0 + "/packs");  // the same sequences in longer rows
  EXPECT_EQ(with(phase0 + "/min_length_exclusive", 5), phase0 + "/min_length_exclusive");
  EXPECT_EQ(with(phase0 + "/strategy_fields/tensor_model_parallel_size", 2),
            phase0 + "/strategy_fields");  // two GPUs' worth of parallelism on one
  EXPECT_EQ(with(phase0 + "/strategy_fields/micro_batch_size", "two"), phase0 + "/strategy_fields/micro_batch_size");
  EXPECT_EQ(with(phase0 + "/strategy", "tp1"), phase0 + "/strategy");
  nlohmann::json cut = good;
  cut["family_plan"]["detail"]["phases"].erase(1);
  EXPECT_EQ(error_path(cut), "/family_plan/detail/phases");
  // Read as a per-layer detail: its first key a per-layer detail does not have.
  EXPECT_EQ(with("/family_plan/family", "per-layer"), "/family_plan/detail/home");
  EXPECT_EQ(with("/family_plan/family", "heterogeneous"), "/family_plan/detail/home");  // read as an asymmetric detail
  EXPECT_EQ(with("/family_plan/family", "pipelined"), "/family_plan/family");
}

}  // namespace
}  // namespace twin

namespace twin {
namespace {

// A scenario can pin a hot-switching plan (strategy.hot_switch, the object best.json's family_plan.detail holds):
// it is the only candidate, simulated as the search simulated it; its errors name the scenario's paths.
TEST(HotSwitchPinnedPlan, APinnedPlanIsTheSearchedPlanAlone) {
  const Scenario searched = testing::one_gpu_scenario();
  const nlohmann::json plan = testing::plan_document(searched, "hot-switch:");
  nlohmann::json doc = to_json(searched);
  doc.erase("search");
  doc["strategy"] = {{"hot_switch", plan["family_plan"]["detail"]}};
  const Scenario pinned = parse_scenario(doc, "pinned.json");
  ASSERT_TRUE(pinned.hot_switch_plan);
  EXPECT_EQ(to_json(pinned)["strategy"], doc["strategy"]);
  const std::vector<Candidate> candidates = hot_switch_family_candidates(pinned, builtin_profile(), 1);
  ASSERT_EQ(candidates.size(), 1u);
  EXPECT_EQ(candidates[0].key(), plan["family_plan"]["key"].get<std::string>());
  EXPECT_EQ(candidates[0].result.iteration_ns, plan["predicted"]["iteration_ns"].get<std::int64_t>());
  EXPECT_TRUE(enumerate_candidates(pinned).empty());  // no uniform strategy beside it

  doc["strategy"]["hot_switch"]["phases"][1]["sequences"] = 3;
  try {
    check_pinned_family_plan(parse_scenario(doc, "pinned.json"));
    ADD_FAILURE() << "expected a refusal";
  } catch (const InputError& error) {
    EXPECT_EQ(error.file(), "pinned.json");
    EXPECT_EQ(error.json_path(), "/strategy/hot_switch/phases/1/sequences");
  }
}

}  // namespace
}  // namespace twin
