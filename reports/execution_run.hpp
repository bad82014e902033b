// An executed run folder read back for `twin report`: the plan (best.json) and the op graph it lowers
// to, what `twin execute` measured (metrics.json, ops.csv) and, where traced, one rank's measured
// iteration (traces/measured_rank<r>.json). Every file is checked; errors are InputErrors naming it.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/op_graph.hpp"
#include "reports/best_plan.hpp"
#include "reports/execution_trace.hpp"
#include "traces/measured_ops.hpp"
#include "traces/plan_prediction.hpp"
#include "traces/run_metrics.hpp"

namespace twin {

struct ExecutedRun {
  std::filesystem::path dir;
  Plan plan;
  IterationGraph graph;                       // lowered from the plan, as the executor did
  PlanPrediction prediction;
  double predicted_mfu = 0;
  double predicted_tokens_per_s = 0;
  RunMetrics metrics;
  std::vector<MeasuredRank> ranks;            // from ops.csv; median_iteration_ns = the rank's kernel span
  std::optional<MeasuredIteration> measured_iteration;  // absent when no rank's trace is in the folder
  std::filesystem::path measured_trace;       // the trace it came from, or the one looked for
};

struct RunFolderOptions {
  std::filesystem::path plan;        // empty: DIR/best.json
  std::optional<int> timeline_rank;  // empty: the lowest rank with a measured trace
};

// The files an executed run must hold ("best.json" only where options.plan is empty), missing ones first
// in the InputError, which names the first missing file and lists them all.
ExecutedRun load_executed_run(const std::filesystem::path& dir, const RunFolderOptions& options = {});

}  // namespace twin
