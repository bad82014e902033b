// Fixed decimals, so that the columns diff cleanly and repeat byte for byte.
#include "reports/training_cost.hpp"

#include "reports/format.hpp"

namespace twin {
namespace {

constexpr double kSecondsPerHour = 3600;
constexpr double kTokensPerMillion = 1e6;

}  // namespace

std::optional<TrainingCost> training_cost(const CostConfig& cost, const Cluster& cluster, const Candidate& candidate) {
  const Throughput& t = candidate.throughput;
  if (!candidate.feasible || t.tokens_per_s <= 0) return std::nullopt;
  const double gpus = cluster.total_gpus();
  const double price_per_hour = cluster_price_per_hour(cost, cluster);
  const double hours_per_million_tokens = kTokensPerMillion / t.tokens_per_s / kSecondsPerHour;
  TrainingCost c;
  c.gpu_hours_per_step = gpus * t.iteration_s / kSecondsPerHour;
  c.gpu_hours_per_million_tokens = gpus * hours_per_million_tokens;
  c.cost_per_million_tokens = price_per_hour * hours_per_million_tokens;
  if (cost.tokens_to_train) {
    c.time_to_train_hours = *cost.tokens_to_train / t.tokens_per_s / kSecondsPerHour;
    c.cost_to_train = price_per_hour * *c.time_to_train_hours;
  }
  return c;
}

std::vector<std::string> training_cost_columns(const CostConfig& cost) {
  return {"gpu_hours_per_step", "gpu_hours_per_million_tokens", "cost_per_million_tokens_" + cost.currency,
          "time_to_train_hours", "cost_to_train_" + cost.currency};
}

std::vector<std::string> training_cost_cells(const CostConfig& cost, const Cluster& cluster, const Candidate& candidate) {
  const std::optional<TrainingCost> c = training_cost(cost, cluster, candidate);
  if (!c) return std::vector<std::string>(training_cost_columns(cost).size());
  const auto optional_cell = [](const std::optional<double>& value) { return value ? fixed(*value, 2) : std::string(); };
  return {fixed(c->gpu_hours_per_step, 6), fixed(c->gpu_hours_per_million_tokens, 4),
          fixed(c->cost_per_million_tokens, 4), optional_cell(c->time_to_train_hours), optional_cell(c->cost_to_train)};
}

}  // namespace twin
