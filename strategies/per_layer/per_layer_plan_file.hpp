// A per-layer plan read back from a plan file (best.json's family_plan.detail, written by PerLayerPlan::to_json):
// every layer strategy one the search could have chosen for the plan's pipeline size and stage micro-batch, the
// stage split covering the model, and the plan's key and home strategy those of the file, so that the commands
// reading a plan lower the graph the simulator priced.
#pragma once
#include <string>

#include "core/plan_file.hpp"
#include "strategies/per_layer/per_layer.hpp"

namespace twin {

// Throws InputError naming `source` and the JSON path at fault (/family_plan/detail/...).
PerLayerPlan read_per_layer_plan(const Plan& plan, const std::string& source);

}  // namespace twin
