// Every number is formatted with fixed decimals (times exactly, from integer ns) so the file diffs cleanly.
#include "reports/ranking_csv.hpp"

#include "reports/format.hpp"
#include "reports/training_cost.hpp"

namespace twin {

const std::vector<std::string>& ranking_csv_columns() {
  static const std::vector<std::string> columns = {
      "place",
      "strategy",
      "family",
      "tensor_model_parallel_size",
      "pipeline_model_parallel_size",
      "context_parallel_size",
      "expert_model_parallel_size",
      "data_parallel_size",
      "virtual_pipeline_model_parallel_size",
      "sequence_parallel",
      "micro_batch_size",
      "num_micro_batches",
      "zero_stage",
      "recompute",
      "schedule",
      "feasible",
      "iteration_time_s",
      "tokens_per_s",
      "mfu",
      "hfu",
      "peak_memory_GiB",
      "compute_s",
      "exposed_communication_s",
      "pipeline_bubble_s",
      "optimizer_s",
      "infeasible_reason",
      "plan",
      "replay",
      "executable",
  };
  return columns;
}


namespace {

// How the iteration was simulated: replayed whole, or extrapolated from two shorter replays of its steady state.
std::string replay_text(const SteadyStateReplay& steady_state) {
  if (!steady_state.extrapolated()) return "whole";
  return "steady state of " + std::to_string(steady_state.first_micro_batches) + " and " +
         std::to_string(steady_state.second_micro_batches) + " micro-batches";
}

void append_row(std::string& csv, const std::vector<std::string>& fields) {
  for (std::size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) csv += ',';
    csv += csv_field(fields[i]);
  }
  csv += "\r\n";
}

std::vector<std::string> candidate_row(const Candidate& candidate, int place) {
  const Strategy& s = candidate.strategy;
  const auto flag = [](bool value) { return std::string(value ? "true" : "false"); };
  std::vector<std::string> row = {
      place > 0 ? std::to_string(place) : std::string(),
      candidate.key(),
      candidate.family(),
      std::to_string(s.tensor_model_parallel_size),
      std::to_string(s.pipeline_model_parallel_size),
      std::to_string(s.context_parallel_size),
      std::to_string(s.expert_model_parallel_size),
      std::to_string(s.data_parallel_size),
      std::to_string(s.virtual_pipeline_model_parallel_size),
      flag(s.sequence_parallel),
      std::to_string(s.micro_batch_size),
      std::to_string(s.num_micro_batches),
      std::to_string(s.zero_stage),
      to_string(s.recompute),
      to_string(s.schedule),
      flag(candidate.feasible),
  };
  const bool simulated = candidate.feasible;
  const IterationResult& result = candidate.result;
  const auto when_simulated = [&](std::string text) { return simulated ? text : std::string(); };
  row.push_back(when_simulated(seconds_text(result.iteration_ns)));
  row.push_back(when_simulated(fixed(candidate.throughput.tokens_per_s, 1)));
  row.push_back(when_simulated(fixed(candidate.throughput.mfu, 4)));
  row.push_back(when_simulated(fixed(candidate.throughput.hfu, 4)));
  // An out-of-memory candidate still has its memory estimate: show how far over it is.
  row.push_back(candidate.memory.per_stage.empty() ? std::string() : gib_text(candidate.memory.peak_bytes(), 3));
  row.push_back(when_simulated(seconds_text(result.breakdown.compute_ns)));
  row.push_back(when_simulated(seconds_text(result.breakdown.exposed_communication_ns)));
  row.push_back(when_simulated(seconds_text(result.breakdown.bubble_ns)));
  row.push_back(when_simulated(seconds_text(result.breakdown.optimizer_ns)));
  row.push_back(candidate.feasible ? std::string() : candidate.infeasible_reason);
  row.push_back(candidate.plan ? candidate.plan->summary() : std::string());
  row.push_back(when_simulated(replay_text(result.steady_state)));
  row.push_back(candidate.executable);
  return row;
}

}  // namespace

std::vector<std::string> ranking_columns(const CostConfig* cost) {
  std::vector<std::string> columns = ranking_csv_columns();
  if (cost)
    for (std::string& name : training_cost_columns(*cost)) columns.push_back(std::move(name));
  return columns;
}

std::vector<std::vector<std::string>> ranking_rows(const Scenario& scenario, const std::vector<Candidate>& candidates,
                                                   const CostConfig* cost) {
  std::vector<std::vector<std::string>> rows;
  rows.reserve(candidates.size());
  int place = 0;
  for (const Candidate& candidate : candidates) {
    rows.push_back(candidate_row(candidate, candidate.feasible ? ++place : 0));
    if (cost)
      for (std::string& cell : training_cost_cells(*cost, scenario.cluster, candidate)) rows.back().push_back(std::move(cell));
  }
  return rows;
}

std::string ranking_csv(const Scenario& scenario, const std::vector<Candidate>& candidates, const CostConfig* cost) {
  std::string csv;
  append_row(csv, ranking_columns(cost));
  for (const std::vector<std::string>& row : ranking_rows(scenario, candidates, cost)) append_row(csv, row);
  return csv;
}

std::string csv_text(const std::vector<std::vector<std::string>>& rows) {
  std::string csv;
  for (const std::vector<std::string>& row : rows) append_row(csv, row);
  return csv;
}

}  // namespace twin
