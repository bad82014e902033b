// A per-layer plan read back from a plan file (best.json's family_plan.detail, written by PerLayerPlan::to_json)
// or pinned by a scenario (strategy.per_layer, the same object): the stage split covering the model, the
// micro-batches making the global batch, and every layer strategy one a stage of the plan's GPUs and micro-batch
// can run (layer_strategy_space over every TP size dividing the stage, ZeRO stage and recompute: a searched plan's
// are among them); a plan file's key and home strategy must be those of its detail, so that the commands
// reading a plan lower the graph the simulator priced.
#pragma once
#include <string>

#include "core/json_reader.hpp"
#include "core/plan_file.hpp"
#include "strategies/per_layer/per_layer.hpp"

namespace twin {

// The detail object at `detail`. Throws InputError at the JSON path at fault.
PerLayerPlan read_per_layer_detail(const JsonReader& detail, const Scenario& scenario);

// Throws InputError naming `source` and the JSON path at fault (/family_plan/detail/...).
PerLayerPlan read_per_layer_plan(const Plan& plan, const std::string& source);

// The scenario's strategy.per_layer (scenario.per_layer_plan, which must be set); throws InputError naming the
// scenario's file and the path at fault (/strategy/per_layer/...).
PerLayerPlan pinned_per_layer_plan(const Scenario& scenario);

}  // namespace twin
