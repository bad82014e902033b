// What a candidate's throughput costs, from the scenario's "cost" section (core/scenario_cost.hpp): GPU-hours per
// step and per million tokens, the price of a million tokens, and the time and price of the tokens to train. Every
// GPU of the cluster is paid for while the run lasts. ranking.csv appends these columns when the scenario has a
// cost section, and the report's ranking (drawn from ranking.csv's rows) shows them.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "core/cluster.hpp"
#include "core/scenario_cost.hpp"
#include "strategies/search.hpp"

namespace twin {

struct TrainingCost {
  double gpu_hours_per_step = 0;
  double gpu_hours_per_million_tokens = 0;
  double cost_per_million_tokens = 0;     // in the section's currency
  std::optional<double> time_to_train_hours;  // set when the section gives tokens_to_train
  std::optional<double> cost_to_train;
};

// nullopt for a candidate that was not simulated (infeasible or pruned).
std::optional<TrainingCost> training_cost(const CostConfig& cost, const Cluster& cluster, const Candidate& candidate);

// ranking.csv's cost columns (their names carry the currency: "cost_per_million_tokens_USD"), and one candidate's
// cells in the same order (empty where it was not simulated, or the section gives no tokens_to_train).
std::vector<std::string> training_cost_columns(const CostConfig& cost);
std::vector<std::string> training_cost_cells(const CostConfig& cost, const Cluster& cluster, const Candidate& candidate);

}  // namespace twin
