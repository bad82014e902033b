// A per-layer plan read back from its best.json: the searched layers come back with their recompute, the graph
// the commands lower is the one the simulator priced, and a file whose detail does not follow from its scenario
// is refused at the JSON path at fault.
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "cost/profile.hpp"
#include "reports/best_plan.hpp"
#include "strategies/families/plan_graphs.hpp"
#include "strategies/per_layer/per_layer_plan_file.hpp"
#include "strategies/per_layer/per_layer_search.hpp"

namespace twin {
namespace {

// The shipped one-GPU scenario: 28 layers at seq 16,384, where recompute pays only on some layers.
Scenario one_gpu_scenario() {
  Scenario scenario = parse_scenario_text(
      R"({ "name": "per-layer on one GPU", "model": { "preset": "llama2-7b", "num_layers": 28 },
           "training": { "seq_length": 16384, "global_batch_size": 2 },
           "cluster": { "nodes": [ { "count": 1, "gpu": "H200-141GB", "gpus_per_node": 1,
                                     "intra_node": { "kind": "nvlink", "bandwidth_GBps": 450 } } ] },
           "search": { "tensor_model_parallel_size": [1], "pipeline_model_parallel_size": [1],
                       "context_parallel_size": [1], "sequence_parallel": [false], "micro_batch_size": [1],
                       "zero_stage": [0], "recompute": ["none", "full"], "schedule": ["1f1b"], "per_layer": true },
           "profile": "builtin" })",
      "one_gpu.json");
  return scenario;
}

nlohmann::json plan_document(const Scenario& scenario) {
  for (const Candidate& c : per_layer_candidates(scenario, builtin_profile())) {
    if (!c.feasible) continue;
    IterationGraph graph;
    Candidate detailed = c.plan->evaluate(scenario, builtin_profile(), true, &graph);
    detailed.memory = c.memory;
    return best_plan_json(scenario, detailed, graph);
  }
  ADD_FAILURE() << "no feasible per-layer candidate";
  return {};
}

std::string error_path(const nlohmann::json& document) {
  try {
    plan_graphs(parse_plan(document, "best.json"), "best.json");
  } catch (const InputError& error) {
    return error.json_path();
  }
  return "(accepted)";
}

TEST(PerLayerPlanFile, TheSearchedLayersAndGraphComeBackFromBestJson) {
  const nlohmann::json document = plan_document(one_gpu_scenario());
  const PlanGraphs lowered = plan_graphs(parse_plan(document, "best.json"), "best.json");
  EXPECT_EQ(lowered.family(), "per-layer");
  EXPECT_EQ(lowered.key, document.at("family_plan").at("key"));
  ASSERT_EQ(lowered.parts.size(), 1u);
  std::vector<Recompute> recompute;
  for (const UnitExecution& layer : lowered.parts[0].layer_units) recompute.push_back(layer.weights.recompute);
  ASSERT_EQ(recompute.size(), 28u);
  int full = 0;
  for (std::size_t i = 0; i < recompute.size(); ++i) {
    EXPECT_EQ(to_string(recompute[i]), document["family_plan"]["detail"]["layers"][i]["recompute"]) << "layer " << i;
    full += recompute[i] == Recompute::full;
  }
  EXPECT_GT(full, 0);   // some layers recompute ...
  EXPECT_LT(full, 28);  // ... not all: otherwise a uniform strategy
  ASSERT_EQ(lowered.graph.classes.size(), 1u);
  EXPECT_EQ(lowered.graph.classes[0].size(), document.at("rank_classes").at(0).at("ops").size());
  const double predicted_s = document.at("predicted").at("iteration_time_s");
  EXPECT_NEAR(lowered.throughput(predicted_s).hfu, document.at("predicted").at("hfu").get<double>(), 1e-9);
  // The per-layer memory estimate, not the home strategy's (the home recomputes nothing and would not fit).
  EXPECT_LT(lowered.parts[0].memory.peak_bytes(), estimate_memory(lowered.scenario, lowered.parts[0].strategy).peak_bytes());
}

TEST(PerLayerPlanFile, ADetailThatDoesNotFollowFromTheScenarioIsRefusedWhereItIs) {
  const nlohmann::json good = plan_document(one_gpu_scenario());
  const auto with = [&](const std::string& pointer, const nlohmann::json& value) {
    nlohmann::json changed = good;
    changed[nlohmann::json::json_pointer(pointer)] = value;
    return error_path(changed);
  };
  const std::string detail = "/family_plan/detail";
  EXPECT_EQ(with(detail + "/layers/0/recompute", "sometimes"), detail + "/layers/0/recompute");
  EXPECT_EQ(with(detail + "/layers/0/group_size", 2), detail + "/layers/0");  // two GPUs' worth on one
  EXPECT_EQ(with(detail + "/stage_num_layers", nlohmann::json::array({27})), detail + "/stage_num_layers");
  EXPECT_EQ(with(detail + "/pipeline_model_parallel_size", 2), detail + "/pipeline_model_parallel_size");
  EXPECT_EQ(with("/family_plan/key", "per-layer.pp1"), "/family_plan/key");
  nlohmann::json flipped = good;  // another plan than its key says
  auto& layer = flipped["family_plan"]["detail"]["layers"][0];
  layer["recompute"] = layer["recompute"] == "full" ? "none" : "full";
  EXPECT_EQ(error_path(flipped), "/family_plan/key");
  nlohmann::json cut = good;
  cut["family_plan"]["detail"]["layers"].erase(0);
  EXPECT_EQ(error_path(cut), detail + "/layers");
}

}  // namespace
}  // namespace twin
