// Kinds come from predicted_vs_measured (the table `twin execute` printed); collectives and contributor
// groups are the same sums keyed finer, in ordered maps so that equal inputs give equal tables.
#include "reports/execution_summary.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>

namespace twin {
namespace {

const RankClass& class_of(const IterationGraph& graph, const PlanPrediction& prediction, const MeasuredRank& rank) {
  const auto index = static_cast<std::size_t>(rank.rank_class);
  if (rank.rank_class < 0 || index >= graph.classes.size() || index >= prediction.ops.size() ||
      rank.ops.size() != graph.classes[index].size() || prediction.ops[index].size() != rank.ops.size())
    throw std::invalid_argument(fmt::format("summarize_execution: rank {} does not match class {} of the plan",
                                            rank.rank, rank.rank_class));
  return graph.classes[index];
}

}  // namespace

std::string ContributorGroup::label() const {
  const char* phase_short = phase == Phase::forward ? "fwd" : phase == Phase::backward ? "bwd" : "opt";
  std::string where = layer >= 0 ? fmt::format("L{}.", layer) : std::string();
  return fmt::format("{}{}.{}", where, to_string(role), phase_short);
}

std::vector<OpPoint> op_points(const IterationGraph& graph, const PlanPrediction& prediction,
                               const std::vector<MeasuredRank>& ranks) {
  std::vector<const MeasuredRank*> ordered;
  for (const MeasuredRank& rank : ranks) ordered.push_back(&rank);
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const MeasuredRank* a, const MeasuredRank* b) { return a->rank < b->rank; });
  std::vector<OpPoint> points;
  for (const MeasuredRank* rank : ordered) {
    const RankClass& rank_class = class_of(graph, prediction, *rank);
    for (OpIndex i = 0; i < rank_class.size(); ++i) {
      const TimeNs predicted_ns = prediction.ops[rank_class.index][i].duration_ns;
      const std::optional<TimeNs>& measured_ns = rank->ops[i].median_ns;
      if (!measured_ns || *measured_ns <= 0 || predicted_ns <= 0) continue;
      points.push_back({rank->rank, rank_class.index, i, rank_class.op(i).kind, predicted_ns, *measured_ns});
    }
  }
  return points;
}

namespace {

void add_rank_rows(const PlanPrediction& prediction, const RunMetrics& metrics, ExecutionSummary& summary) {
  for (const RankMetrics& rank : metrics.ranks) {
    if (rank.rank_class < 0 || static_cast<std::size_t>(rank.rank_class) >= prediction.class_finish_ns.size())
      throw std::invalid_argument(
          fmt::format("summarize_execution: rank {} names class {}, which the plan lacks", rank.rank, rank.rank_class));
    const TimeNs predicted_ns = prediction.class_finish_ns[static_cast<std::size_t>(rank.rank_class)];
    summary.ranks.push_back({rank.rank, rank.rank_class, predicted_ns, rank.kernel_span_ns,
                             relative_error(rank.kernel_span_ns, predicted_ns), rank.median_step_ns,
                             rank.peak_memory_GiB, rank.predicted_peak_memory_GiB});
  }
}

// Sums every measured op into its collective's row (communication only) and its contributor group.
void add_op_sums(const IterationGraph& graph, const PlanPrediction& prediction, const std::vector<MeasuredRank>& ranks,
                 std::size_t top, ExecutionSummary& summary) {
  std::map<std::pair<OpKind, GroupKind>, CollectiveComparison> collectives;
  std::map<std::tuple<OpKind, OpRole, Phase, int>, ContributorGroup> groups;
  for (const MeasuredRank& rank : ranks) {
    const RankClass& rank_class = class_of(graph, prediction, rank);
    for (OpIndex i = 0; i < rank_class.size(); ++i) {
      const Op& op = rank_class.op(i);
      const TimeNs predicted_ns = prediction.ops[rank_class.index][i].duration_ns;
      const std::optional<TimeNs>& measured_ns = rank.ops[i].median_ns;
      if (op.is_communication()) {
        CollectiveComparison& row = collectives[{op.kind, op.group}];
        row.kind = op.kind, row.group = op.group;
        if (!measured_ns) {
          ++row.unmeasured_ops;
        } else {
          ++row.ops;
          row.bytes += op.bytes;
          row.predicted_ns += predicted_ns;
          row.measured_ns += *measured_ns;
        }
      }
      if (!measured_ns) continue;
      summary.measured_op_predicted_ns += predicted_ns;
      summary.measured_op_measured_ns += *measured_ns;
      ContributorGroup& group = groups[{op.kind, op.role, op.phase, op.layer}];
      group.kind = op.kind, group.role = op.role, group.phase = op.phase, group.layer = op.layer;
      ++group.ops;
      group.predicted_ns += predicted_ns;
      group.measured_ns += *measured_ns;
    }
  }
  for (auto& [key, row] : collectives) {
    if (row.ops > 0) row.error = relative_error(row.measured_ns, row.predicted_ns);
    summary.collectives.push_back(row);
  }
  // Groups come out of the map in key order, so the stable sort breaks ties by (kind, role, phase, layer).
  for (const auto& [key, group] : groups) summary.contributors.push_back(group);
  std::stable_sort(summary.contributors.begin(), summary.contributors.end(),
                   [](const ContributorGroup& a, const ContributorGroup& b) {
                     return std::llabs(a.difference_ns()) > std::llabs(b.difference_ns());
                   });
  if (summary.contributors.size() > top) summary.contributors.resize(top);
}

}  // namespace

ExecutionSummary summarize_execution(const IterationGraph& graph, const PlanPrediction& prediction,
                                     const std::vector<MeasuredRank>& ranks, const RunMetrics& metrics,
                                     std::size_t top) {
  ExecutionSummary summary;
  summary.predicted_iteration_ns = prediction.iteration_ns;
  summary.measured_iteration_ns = metrics.measured_iteration_ns;
  summary.error = relative_error(summary.measured_iteration_ns, summary.predicted_iteration_ns);
  summary.measured_kernel_span_ns = metrics.kernel_span_iteration_ns;
  for (const StepMetrics& step : metrics.steps)
    summary.steps.push_back({step.step, step.loss, step.iteration_ns, prediction.iteration_ns, !step.measured,
                             relative_error(step.iteration_ns, prediction.iteration_ns)});
  summary.kinds = predicted_vs_measured(graph, ranks, prediction).kinds;
  add_rank_rows(prediction, metrics, summary);
  add_op_sums(graph, prediction, ranks, top, summary);
  return summary;
}

ExecutionSummary summarize_execution(const ExecutedRun& run, std::size_t top) {
  return summarize_execution(run.graph, run.prediction, run.ranks, run.metrics, top);
}

}  // namespace twin
