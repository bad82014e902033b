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

// The plan best.json would hold for `candidate` (which need not have been simulated), read back as twin execute
// reads it, without predicted numbers and ops: what the executor's plan check takes. Errors name the plan's key.
Plan candidate_plan(const Scenario& scenario, const Candidate& candidate);

// A plan as best.json lays it out: indented like dump(1), but every array of scalars (an op's row) on one line.
std::string best_plan_text(const nlohmann::json& plan);

// Writes best_plan_text(best_plan_json(...)) atomically, the op rows straight from `graph` (the same bytes).
void write_best_plan(const std::filesystem::path& path, const Scenario& scenario, const Candidate& best,
                     const IterationGraph& graph);

}  // namespace twin
