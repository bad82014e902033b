// A hot-switching scenario on one GPU and the plan files of its search (strategies, executor tests).
#pragma once
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cost/profile.hpp"
#include "core/scenario.hpp"
#include "reports/best_plan.hpp"
#include "strategies/hot_switch/hot_switch_search.hpp"

namespace twin::testing {

// Two layers of llama2-7b's widths on one H200: 12 sequences of 1,024 tokens and 2 of 4,096.
inline Scenario one_gpu_scenario() {
  return parse_scenario_text(R"({
    "name": "hot switching on one GPU",
    "model": { "preset": "llama2-7b", "num_layers": 2 },
    "training": { "seq_length": 4096, "global_batch_size": 14,
                  "seq_length_buckets": [ { "max": 1024, "fraction": 0.86 }, { "max": 4096, "fraction": 0.14 } ] },
    "cluster": { "nodes": [ { "count": 1, "gpu": "H200-141GB", "gpus_per_node": 1,
                              "intra_node": { "kind": "nvlink", "bandwidth_GBps": 450 } } ] },
    "search": { "tensor_model_parallel_size": [1], "pipeline_model_parallel_size": [1],
                "context_parallel_size": [1], "sequence_parallel": [false], "micro_batch_size": [1, 2],
                "zero_stage": [0], "recompute": ["none", "full"], "schedule": ["1f1b"], "hot_switch": true },
    "profile": "builtin" })",
                             "one_gpu.json");
}

// The plan file of the first feasible candidate whose key starts with `family_key_prefix` ("hot-switch:",
// "static-packed:").
inline nlohmann::json plan_document(const Scenario& scenario, const std::string& family_key_prefix) {
  for (const Candidate& c : search_hot_switch(scenario, builtin_profile(), 1)) {
    if (!c.feasible || c.key().rfind(family_key_prefix, 0) != 0) continue;
    IterationGraph graph;
    Candidate detailed = c.plan->evaluate(scenario, builtin_profile(), true, &graph);
    detailed.memory = c.memory;
    return best_plan_json(scenario, detailed, graph);
  }
  ADD_FAILURE() << "no candidate " << family_key_prefix;
  return {};
}

}  // namespace twin::testing
