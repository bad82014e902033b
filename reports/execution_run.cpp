// The plan is lowered again, exactly as `twin execute` lowered it, so that ops.csv rows and trace events
// are checked op by op against the graph that produced them; a folder of another plan fails loudly.
#include "reports/execution_run.hpp"

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/json_reader.hpp"
#include "strategies/families/plan_graphs.hpp"
#include "traces/ops_csv_reader.hpp"

namespace twin {
namespace {

nlohmann::json read_json(const std::filesystem::path& path, const char* what) {
  return parse_input_json(read_input_file(path, fmt::format("a readable {}", what), kMaxRunFileBytes), path.string());
}

std::filesystem::path trace_path(const std::filesystem::path& dir, int rank) {
  return dir / "traces" / fmt::format("measured_rank{}.json", rank);
}

}  // namespace

ExecutedRun load_executed_run(const std::filesystem::path& dir, const RunFolderOptions& options) {
  if (!std::filesystem::is_directory(dir))
    throw InputError(dir.string(), "", "a run folder of twin execute (it is not a folder)");
  const std::filesystem::path plan_path = options.plan.empty() ? dir / "best.json" : options.plan;
  const std::filesystem::path metrics_path = dir / "metrics.json", ops_path = dir / "ops.csv";
  std::vector<std::string> missing;
  for (const std::filesystem::path& path : {plan_path, metrics_path, ops_path})
    if (!std::filesystem::exists(path)) missing.push_back(path.string());  // a FIFO or folder: read_input_file names it
  if (!missing.empty())
    throw InputError(missing.front(), "",
                     fmt::format("not found: `twin report` reads the folder of an executed run (`twin execute "
                                 "--best --run DIR` writes metrics.json and ops.csv next to best.json); missing: {}",
                                 fmt::join(missing, ", ")));

  ExecutedRun run;
  run.dir = dir;
  run.plan = read_plan(plan_path);
  run.graph = plan_graphs(run.plan, plan_path.string()).graph;
  run.prediction = read_plan_prediction(run.plan.document, run.graph, plan_path.string());
  const std::string plan_source = plan_path.string();
  const JsonReader predicted = JsonReader(run.plan.document, plan_source).required("predicted");
  run.predicted_mfu = predicted.required("mfu").number(0, 1e3, "a fraction, at least 0");
  run.predicted_tokens_per_s = predicted.required("tokens_per_s").number(0, 1e300, "tokens per second, at least 0");

  run.metrics = parse_run_metrics(read_json(metrics_path, "metrics.json (written by twin execute)"),
                                  metrics_path.string());
  if (run.metrics.strategy != run.plan.strategy.key())
    throw InputError(metrics_path.string(), "/strategy",
                     fmt::format("\"{}\" (the strategy of {}), got \"{}\": the run is of another plan",
                                 run.plan.strategy.key(), plan_path.string(), run.metrics.strategy));

  run.ranks = read_measured_ranks(ops_path, run.graph, run.prediction);
  for (MeasuredRank& rank : run.ranks) {
    const RankMetrics* entry = nullptr;
    for (const RankMetrics& candidate : run.metrics.ranks)
      if (candidate.rank == rank.rank && candidate.rank_class == rank.rank_class) entry = &candidate;
    if (!entry)
      throw InputError(metrics_path.string(), "/ranks",
                       fmt::format("an entry for rank {} of class {} (ops.csv lists it)", rank.rank, rank.rank_class));
    rank.median_iteration_ns = entry->kernel_span_ns;
  }

  std::optional<int> timeline_rank = options.timeline_rank;
  if (!timeline_rank) {
    for (const RankMetrics& rank : run.metrics.ranks)
      if (std::filesystem::is_regular_file(trace_path(dir, rank.rank))) {
        timeline_rank = rank.rank;
        break;
      }
  } else if (!std::filesystem::is_regular_file(trace_path(dir, *timeline_rank))) {
    throw InputError(trace_path(dir, *timeline_rank).string(), "",
                     fmt::format("the measured trace of rank {} (not found)", *timeline_rank));
  }
  run.measured_trace = trace_path(dir, timeline_rank.value_or(0));
  if (timeline_rank) run.measured_iteration = read_median_measured_iteration(run.measured_trace, run.graph);
  return run;
}

}  // namespace twin
