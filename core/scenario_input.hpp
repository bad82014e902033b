// A scenario file as a run reads it: the Scenario the search simulates, and beside it the sections that are no
// input to the simulation: "cost" (prices for the ranking) and "sweep" (the scenarios `twin sweep` simulates).
#pragma once
#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/scenario.hpp"
#include "core/scenario_cost.hpp"
#include "core/scenario_sweep.hpp"

namespace twin {

struct ScenarioInput {
  Scenario scenario;
  std::optional<CostConfig> cost;
  std::optional<SweepAxes> sweep;
  nlohmann::json document;  // as read: a sweep builds its points from it
};

// Throws InputError naming `source` (the file, or what stands for it), the JSON path and the expectation.
ScenarioInput read_scenario_input(nlohmann::json document, const std::string& source);
// The file's size and type checks and JSON parse of load_scenario, then read_scenario_input.
ScenarioInput load_scenario_input(const std::filesystem::path& path);

}  // namespace twin
