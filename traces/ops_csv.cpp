// Integers print as integers and the error with fixed decimals, so the same run gives the same bytes.
#include "traces/ops_csv.hpp"

#include <algorithm>
#include <optional>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "core/text_format.hpp"

namespace twin {
namespace {

std::string optional_ns(const std::optional<TimeNs>& value) { return value ? std::to_string(*value) : std::string(); }

void append_row(const std::vector<std::string>& fields, std::string& csv) {
  for (std::size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) csv += ',';
    csv += csv_field(fields[i]);
  }
  csv += "\r\n";
}

const RankClass& checked_class(const IterationGraph& graph, const MeasuredRank& rank, const PlanPrediction& prediction) {
  if (rank.rank_class < 0 || static_cast<std::size_t>(rank.rank_class) >= graph.classes.size())
    throw std::invalid_argument(fmt::format("ops_csv: rank {} names rank class {}, but the graph has {} classes",
                                            rank.rank, rank.rank_class, graph.classes.size()));
  const RankClass& rank_class = graph.classes[static_cast<std::size_t>(rank.rank_class)];
  if (rank.ops.size() != rank_class.size())
    throw std::invalid_argument(fmt::format("ops_csv: rank {} has {} measured ops, class {} has {}", rank.rank,
                                            rank.ops.size(), rank_class.index, rank_class.size()));
  if (static_cast<std::size_t>(rank.rank_class) >= prediction.ops.size() ||
      prediction.ops[static_cast<std::size_t>(rank.rank_class)].size() != rank_class.size())
    throw std::invalid_argument(
        fmt::format("ops_csv: the prediction has no op times for every op of class {}", rank_class.index));
  return rank_class;
}

}  // namespace

const std::vector<std::string>& ops_csv_columns() {
  static const std::vector<std::string> columns = {
      "op_id",         "rank",   "rank_class",         "name",
      "kind",          "role",   "phase",              "layer",
      "micro_batch",   "stream", "predicted_start_ns", "predicted_duration_ns",
      "measured_median_ns", "measured_min_ns", "measured_max_ns", "kernels",
      "error",         "shared_gpu_iterations",
  };
  return columns;
}

std::string ops_csv(const IterationGraph& graph, const std::vector<MeasuredRank>& ranks,
                    const PlanPrediction& prediction) {
  std::vector<const MeasuredRank*> ordered;
  std::set<std::pair<int, int>> seen;  // a rank runs one class per part of the step (hot switching's phases)
  for (const MeasuredRank& rank : ranks) {
    if (!seen.insert({rank.rank, rank.rank_class}).second)
      throw std::invalid_argument(fmt::format("ops_csv: rank {} with class {} is listed twice", rank.rank, rank.rank_class));
    checked_class(graph, rank, prediction);
    ordered.push_back(&rank);
  }
  std::sort(ordered.begin(), ordered.end(), [](const MeasuredRank* a, const MeasuredRank* b) {
    return std::pair(a->rank, a->rank_class) < std::pair(b->rank, b->rank_class);
  });

  std::string csv;
  append_row(ops_csv_columns(), csv);
  for (const MeasuredRank* rank : ordered) {
    const RankClass& rank_class = graph.classes[static_cast<std::size_t>(rank->rank_class)];
    const std::vector<PredictedOpTime>& predicted = prediction.ops[static_cast<std::size_t>(rank->rank_class)];
    for (OpIndex i = 0; i < rank_class.size(); ++i) {
      const Op& op = rank_class.op(i);
      const OpMeasurement& measured = rank->ops[i];
      const std::optional<double> error = relative_error(measured.median_ns, predicted[i].duration_ns);
      append_row({std::to_string(i), std::to_string(rank->rank), std::to_string(rank_class.index), op_name(op),
                  to_string(op.kind), to_string(op.role), to_string(op.phase), std::to_string(op.layer),
                  std::to_string(op.micro_batch), to_string(op.stream), std::to_string(predicted[i].start_ns),
                  std::to_string(predicted[i].duration_ns), optional_ns(measured.median_ns),
                  optional_ns(measured.min_ns), optional_ns(measured.max_ns), std::to_string(measured.kernels),
                  error ? fixed(*error, 4) : std::string(), std::to_string(measured.shared_gpu_iterations)},
                 csv);
    }
  }
  return csv;
}

}  // namespace twin
