// strategy.pipelines: a fixed asymmetric plan (HexiScale) read from and written to scenario JSON, and
// checked against the model, the global batch and the cluster it runs on.
#pragma once
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/json_reader.hpp"
#include "core/scenario.hpp"

namespace twin {

// Reads `pipelines` (strategy.pipelines) for a scenario whose model, training and cluster are parsed.
// Throws InputError at the offending path: a device out of range or used twice, a tensor-parallel size
// other than the stage's device count or not dividing heads, query groups or FFN width, a stage spread
// over nodes, layers not summing to the model's, batch shares not summing to the global batch, a MoE
// model, or tied embeddings split over stages.
std::vector<AsymmetricPipeline> parse_pipelines(const JsonReader& pipelines, const Scenario& scenario);

// The plan as the scenario writes it (devices as global GPU indices).
nlohmann::json pipelines_json(const std::vector<AsymmetricPipeline>& pipelines);

// The scenario's `strategy` that pins the plan: `pipelines` and the fields they share (sequence_parallel,
// recompute, schedule, zero_stage, taken from `shared`). best.json writes an asymmetric plan's strategy so too.
nlohmann::json asymmetric_strategy_json(const Strategy& shared, const std::vector<AsymmetricPipeline>& pipelines);

}  // namespace twin
