// A per-layer plan file as twin simulate writes it for a small Llama-shaped model (3 layers, hidden 256, GQA 4/2,
// vocabulary 2048, untied output layer; seq 256, global batch 2) on `gpus` H200s of one node, `layers` pinned in one
// stage at one sample per stage micro-batch: beside a Ulysses layer of 2 GPUs its embedding or output layer holds
// half a sample per GPU (executor and GPU tests).
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/plan_file.hpp"
#include "core/scenario.hpp"
#include "cost/profile.hpp"
#include "reports/best_plan.hpp"
#include "strategies/per_layer/per_layer_search.hpp"
#include "tests/strategies/per_layer/per_layer_fixture.hpp"

namespace twin::testing {

inline constexpr std::int64_t kUlyssesEdgeSeq = 256;

inline Plan ulysses_edge_plan(int gpus, const std::vector<LayerStrategy>& layers) {
  nlohmann::json doc = nlohmann::json::parse(R"({ "name": "ulysses-edge", "model": { "preset": "llama2-7b",
      "num_layers": 3, "hidden_size": 256, "ffn_hidden_size": 704, "num_attention_heads": 4, "num_query_groups": 2,
      "vocab_size": 2048, "untie_embeddings_and_output_weights": true },
    "training": { "global_batch_size": 2 },
    "cluster": { "nodes": [ { "count": 1, "gpu": "H200-141GB", "gpus_per_node": 1,
                              "intra_node": { "kind": "nvlink", "bandwidth_GBps": 450 } } ] } })");
  doc["cluster"]["nodes"][0]["gpus_per_node"] = gpus;
  doc["training"]["seq_length"] = kUlyssesEdgeSeq;
  doc["strategy"] = {{"per_layer", per_layer_plan(1, 1, 2, {3}, layers).to_json()}};
  const Scenario scenario = parse_scenario(doc, "ulysses-edge.json");
  const std::vector<Candidate> ranked = per_layer_candidates(scenario, builtin_profile());
  if (ranked.size() != 1 || !ranked[0].feasible) throw std::runtime_error("the pinned per-layer plan is not feasible");
  IterationGraph graph;
  Candidate detailed = ranked[0].plan->evaluate(scenario, builtin_profile(), true, &graph);
  detailed.memory = ranked[0].memory;
  return parse_plan(best_plan_json(scenario, detailed, graph), "best.json");
}

}  // namespace twin::testing
