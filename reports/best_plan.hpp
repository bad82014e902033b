// best.json: the winning plan as the executor takes it. It names the scenario (resolved) and the
// strategy, from which lower_to_op_graphs regenerates the op graph exactly, plus the predicted numbers
// and every op's predicted start and duration so that the executor and traces can check agreement.
#pragma once
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "core/op_graph.hpp"
#include "core/scenario.hpp"
#include "core/strategy.hpp"
#include "strategies/search.hpp"

namespace twin {

inline constexpr int kPlanFormatVersion = 1;
// Bump when lowering changes the op graph a strategy gives: a plan of another version names other ops.
inline constexpr int kLoweringVersion = 1;

// Columns of each entry of rank_classes[].ops, in order.
inline constexpr const char* kPlanOpColumns[] = {"op_id",  "kind",   "role",               "layer",
                                                 "micro_batch", "stream", "predicted_start_ns", "predicted_duration_ns"};

// `best.result` must carry op timings for every class of `graph` (throws std::invalid_argument otherwise).
nlohmann::json best_plan_json(const Scenario& scenario, const Candidate& best, const IterationGraph& graph);

// Writes best_plan_json atomically, indented.
void write_best_plan(const std::filesystem::path& path, const Scenario& scenario, const Candidate& best,
                     const IterationGraph& graph);

struct Plan {
  Scenario scenario;   // with scenario.strategy set to `strategy`
  Strategy strategy;
  std::string profile;
  nlohmann::json document;  // the whole file, for the predicted numbers and op list
};

// Throws InputError (file, JSON path, expectation) for unreadable, malformed or foreign files.
Plan read_plan(const std::filesystem::path& path);
Plan parse_plan(const nlohmann::json& document, const std::string& source);

}  // namespace twin
