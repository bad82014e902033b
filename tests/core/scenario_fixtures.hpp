// The smallest scenario the core tests parse (Llama-2-7B, one node of eight H100s, sequence 4096, batch 512), with
// keys of the training section added: one document for every test that varies a training key; and the error a
// document gives.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/scenario.hpp"

namespace twin::testing {

inline nlohmann::json scenario_with_training(const nlohmann::json& training_keys) {
  nlohmann::json s = nlohmann::json::parse(R"({
    "name": "t",
    "model": {"preset": "llama2-7b"},
    "training": {"seq_length": 4096, "global_batch_size": 512},
    "cluster": {"nodes": [{"count": 1, "gpu": "H100-SXM-80GB", "gpus_per_node": 8}]}
  })");
  for (const auto& [key, value] : training_keys.items()) s["training"][key] = value;  // `{}` arrives as null
  return s;
}

// "<JSON path>: <message>" of the error parsing `document` gives, "" when it parses.
inline std::string scenario_error(const nlohmann::json& document) {
  try {
    parse_scenario(document, "scenario.json");
  } catch (const InputError& e) {
    return e.json_path() + ": " + e.what();
  }
  return "";
}

}  // namespace twin::testing
