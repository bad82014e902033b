// best.json: the winning plan as the executor takes it. It names the scenario (resolved) and the
// strategy, from which lower_to_op_graphs regenerates the op graph exactly, plus the predicted numbers
// and every op's predicted start and duration so that the executor and traces can check agreement.
#pragma once
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "core/op_graph.hpp"
#include "core/plan_file.hpp"  // Plan, read_plan: reading best.json back
#include "core/scenario.hpp"
#include "core/strategy.hpp"
#include "strategies/search.hpp"

namespace twin {

// `best.result` must carry op timings for every class of `graph` (throws std::invalid_argument otherwise).
nlohmann::json best_plan_json(const Scenario& scenario, const Candidate& best, const IterationGraph& graph);

// Writes best_plan_json atomically, indented.
void write_best_plan(const std::filesystem::path& path, const Scenario& scenario, const Candidate& best,
                     const IterationGraph& graph);

}  // namespace twin
