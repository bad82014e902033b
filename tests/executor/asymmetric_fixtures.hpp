// Asymmetric plans on four GPUs of one node for the executor's tests (CPU and GPU): a small Llama-shaped model
// (4 layers, GQA) under a plan pinned in the scenario (strategy.pipelines), lowered as plan_graphs lowers one.
#pragma once
#include <string>

#include "core/scenario.hpp"
#include "strategies/families/plan_graphs.hpp"

namespace twin::testing {

// Pipeline 0: TP 2 over GPUs 0-1, every layer; pipeline 1: GPUs 2 and 3, two layers each. Four micro-batches each.
inline const char* kTp2BesidePp2 = R"([
  { "micro_batch_size": 1, "num_micro_batches": 4,
    "stages": [ { "devices": [0, 1], "tensor_model_parallel_size": 2, "num_layers": 4 } ] },
  { "micro_batch_size": 1, "num_micro_batches": 4,
    "stages": [ { "devices": [2], "tensor_model_parallel_size": 1, "num_layers": 2 },
                { "devices": [3], "tensor_model_parallel_size": 1, "num_layers": 2 } ] } ])";

// Pipeline 0: TP 2 over GPUs 0-1 with three layers, then GPU 2 with one (a boundary between TP sizes); pipeline 1:
// GPU 3, every layer. Five and three micro-batches.
inline const char* kTp2ToTp1BesideTp1 = R"([
  { "micro_batch_size": 1, "num_micro_batches": 5,
    "stages": [ { "devices": [0, 1], "tensor_model_parallel_size": 2, "num_layers": 3 },
                { "devices": [2], "tensor_model_parallel_size": 1, "num_layers": 1 } ] },
  { "micro_batch_size": 1, "num_micro_batches": 3,
    "stages": [ { "devices": [3], "tensor_model_parallel_size": 1, "num_layers": 4 } ] } ])";

// `vocabulary` 8000 pads to 8064 at TP 1 and to 8192 at TP 2 (multiples of 128 x TP).
inline Scenario asymmetric_scenario(const std::string& pipelines, bool sequence_parallel, int zero_stage = 0,
                                    int vocabulary = 8192) {
  std::string text = R"({ "name": "asymmetric", "model": { "preset": "llama2-7b", "num_layers": 4, "hidden_size": 1024,
      "ffn_hidden_size": 2816, "num_attention_heads": 16, "num_query_groups": 4, "vocab_size": )" +
                     std::to_string(vocabulary) + R"(, "untie_embeddings_and_output_weights": true },
    "training": { "seq_length": 1024, "global_batch_size": 8 },
    "cluster": { "nodes": [ { "count": 1, "gpu": "H100-SXM-80GB", "gpus_per_node": 4,
                              "intra_node": { "kind": "nvswitch", "bandwidth_GBps": 450 } } ] },
    "strategy": { "recompute": "none", "schedule": "1f1b", "sequence_parallel": )";
  text += sequence_parallel ? "true" : "false";
  text += ", \"zero_stage\": " + std::to_string(zero_stage) + ", \"pipelines\": " + pipelines + " } }";
  return parse_scenario_text(text, "asymmetric.json");
}

inline PlanGraphs asymmetric_graphs(const Scenario& scenario) {
  return asymmetric_plan_graphs(scenario, AsymmetricPlanDetail{*scenario.strategy, scenario.pipelines});
}

}  // namespace twin::testing
