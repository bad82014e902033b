// An asymmetric plan's best.json reads back as the plan it was written from: every plan the heterogeneous search
// offers on the shipped mixed cluster, written as best.json writes it and read as twin execute reads it, has the
// same pipelines and shared fields, lowers to the same ops and simulates to the same nanosecond. Before 2026-11-29
// the file's strategy was the plan's home strategy (pipeline 0's first stage, the pipelines as replicas), which
// the scenario parser checks against the cluster: a home of TP 2 x PP 3 on 16 GPUs made the file unreadable.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/scenario.hpp"
#include "core/scenario_pipelines.hpp"
#include "cost/profile.hpp"
#include "reports/best_plan.hpp"
#include "sim/simulate.hpp"
#include "strategies/families/plan_graphs.hpp"
#include "strategies/heterogeneous/asymmetric_plan.hpp"
#include "strategies/heterogeneous/asymmetric_plan_file.hpp"
#include "strategies/heterogeneous/heterogeneous_search.hpp"

namespace twin {
namespace {

Scenario mixed_scenario(const std::string& name) {
  return load_scenario(std::string(TWIN_SOURCE_DIR) + "/scenarios/" + name);
}

// The ops two graphs hold, as best.json's rows name them (kind, role, layer, micro-batch, stream), class by class.
void expect_same_ops(const IterationGraph& read, const IterationGraph& written, const std::string& key) {
  ASSERT_EQ(read.classes.size(), written.classes.size()) << key;
  for (std::size_t c = 0; c < read.classes.size(); ++c) {
    const RankClass& a = read.classes[c];
    const RankClass& b = written.classes[c];
    ASSERT_EQ(a.size(), b.size()) << key << " class " << c;
    EXPECT_EQ(a.num_ranks, b.num_ranks) << key << " class " << c;
    EXPECT_EQ(a.first_rank, b.first_rank) << key << " class " << c;
    for (OpIndex i = 0; i < a.size(); ++i) {
      const Op& x = a.op(i);
      const Op& y = b.op(i);
      const bool same = x.kind == y.kind && x.role == y.role && x.layer == y.layer &&
                        x.micro_batch == y.micro_batch && x.stream == y.stream;
      ASSERT_TRUE(same) << key << " class " << c << " op " << i;
    }
  }
}

TEST(AsymmetricPlanFile, EveryPlanOfTheMixedClusterReadsBackAsItself) {
  const Scenario scenario = mixed_scenario("mixed-h100-a100-llama2-13b.json");
  const Profile profile = builtin_profile();
  const int world = scenario.cluster.total_gpus();
  int checked = 0, homes_off_the_cluster = 0;
  for (const Candidate& candidate : heterogeneous_candidates(scenario, profile, 1)) {
    if (!candidate.feasible) continue;
    const AsymmetricPlan& written = *candidate.plan_as<AsymmetricPlan>();
    const Strategy& home = candidate.strategy;  // ranking.csv's sizes
    if (world % (home.tensor_model_parallel_size * home.pipeline_model_parallel_size) != 0) ++homes_off_the_cluster;
    const Plan plan = candidate_plan(scenario, candidate);  // best.json's header, parsed as twin execute parses it
    EXPECT_EQ(plan.scenario.pipelines, written.pipelines) << candidate.key();
    EXPECT_EQ(plan.document.at("strategy"), asymmetric_strategy_json(written.shared, written.pipelines));
    const AsymmetricPlanDetail read = read_asymmetric_plan(plan, "best.json");
    EXPECT_EQ(read.pipelines, written.pipelines) << candidate.key();
    EXPECT_EQ(asymmetric_strategy_json(read.shared, read.pipelines),
              asymmetric_strategy_json(written.shared, written.pipelines));
    const PlanGraphs lowered = plan_graphs(plan, "best.json");
    EXPECT_EQ(lowered.key, candidate.key());
    EXPECT_EQ(lowered.world_size(), world);
    expect_same_ops(lowered.graph, lower_asymmetric_plan(scenario, written.shared, written.pipelines),
                    candidate.key());
    EXPECT_EQ(simulate_iteration(lowered.graph, plan.scenario.cluster, profile).iteration_ns,
              candidate.result.iteration_ns)
        << candidate.key();
    ++checked;
  }
  EXPECT_EQ(checked, 8);
  EXPECT_GE(homes_off_the_cluster, 1);  // the plan whose file could not be read before
}

// A plan file whose strategy and family detail name two plans is refused: the detail is what the family lowers.
TEST(AsymmetricPlanFile, AStrategyThatIsNotTheDetailsIsRefused) {
  const Scenario scenario = mixed_scenario("mixed-h100-a100-fixed-plan.json");
  const std::vector<Candidate> plans = heterogeneous_family_candidates(scenario, builtin_profile(), 1);
  ASSERT_EQ(plans.size(), 1u);
  nlohmann::json document = candidate_plan(scenario, plans.front()).document;
  EXPECT_NO_THROW(read_asymmetric_plan(parse_plan(document, "best.json"), "best.json"));
  document["strategy"]["recompute"] = document["strategy"]["recompute"] == "full" ? "none" : "full";
  try {
    read_asymmetric_plan(parse_plan(document, "best.json"), "best.json");
    ADD_FAILURE() << "read a strategy that is not the detail's";
  } catch (const InputError& error) {
    EXPECT_EQ(error.json_path(), "/family_plan/detail");
  }
}

// The search offers no asymmetric plan with FP8 linears (a pinned one is refused, so its file would not read back).
TEST(AsymmetricPlanFile, NoAsymmetricPlanWithFp8Linears) {
  const std::string text = R"({ "name": "fp8 on H100 and H200",
    "model": { "preset": "llama2-7b", "num_layers": 4, "untie_embeddings_and_output_weights": true },
    "training": { "seq_length": 2048, "global_batch_size": 16 FP8 },
    "cluster": { "nodes": [ { "count": 1, "gpu": "H100-SXM-80GB", "gpus_per_node": 4,
                              "nics": { "count": 4, "bandwidth_Gbps": 400 } },
                            { "count": 1, "gpu": "H200-141GB", "gpus_per_node": 4,
                              "nics": { "count": 4, "bandwidth_Gbps": 400 } } ] },
    "search": { "tensor_model_parallel_size": [1, 2], "pipeline_model_parallel_size": [1, 2],
                "micro_batch_size": [1], "zero_stage": [0], "recompute": ["none"] } })";
  const auto with = [&](const std::string& fp8) {
    std::string scenario = text;
    scenario.replace(scenario.find(" FP8"), 4, fp8);
    return parse_scenario_text(scenario, "fp8.json");
  };
  EXPECT_FALSE(heterogeneous_candidates(with(""), builtin_profile(), 1).empty());
  EXPECT_TRUE(heterogeneous_candidates(with(R"(, "fp8": { "format": "hybrid", "recipe": "tensorwise" })"), builtin_profile(), 1).empty());
}

}  // namespace
}  // namespace twin
