// Sums stay integer nanoseconds; errors are computed once from the sums, never averaged from per-op ratios
// (a kind's error is then weighted by time, as the iteration sees it).
#include "traces/predicted_vs_measured.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <map>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "core/op_kinds.hpp"

namespace twin {
namespace {

void check_rank(const IterationGraph& graph, const MeasuredRank& rank, const PlanPrediction& prediction) {
  const auto rank_class = static_cast<std::size_t>(rank.rank_class);
  if (rank.rank_class < 0 || rank_class >= graph.classes.size() || rank_class >= prediction.ops.size() ||
      rank_class >= prediction.class_finish_ns.size())
    throw std::invalid_argument(
        fmt::format("predicted_vs_measured: rank {} names rank class {}, which the graph or the prediction lacks",
                    rank.rank, rank.rank_class));
  const std::size_t ops = graph.classes[rank_class].size();
  if (rank.ops.size() != ops || prediction.ops[rank_class].size() != ops)
    throw std::invalid_argument(fmt::format(
        "predicted_vs_measured: rank {}: class {} has {} ops, the measurement {} and the prediction {}", rank.rank,
        rank.rank_class, ops, rank.ops.size(), prediction.ops[rank_class].size()));
}

// A rank's span in an iteration runs from the first kernel of its first class to the last of its last (a rank
// runs one class per part of the step); the iteration lasts as long as the longest rank's.
std::optional<TimeNs> slowest_rank_median(const std::vector<MeasuredRank>& ranks) {
  if (ranks.empty()) return std::nullopt;
  std::map<std::pair<std::int32_t, int>, std::pair<std::size_t, IterationSpan>> by_rank;  // (iteration, rank)
  std::map<int, std::size_t> classes_of_rank;
  for (const MeasuredRank& rank : ranks) {
    ++classes_of_rank[rank.rank];
    for (const IterationSpan& span : rank.iteration_spans) {
      auto [entry, added] = by_rank.try_emplace({span.iteration, rank.rank}, 0, span);
      auto& [seen, merged] = entry->second;
      ++seen;
      merged.start_ns = std::min(merged.start_ns, span.start_ns);
      merged.end_ns = std::max(merged.end_ns, span.end_ns);
    }
  }
  std::map<std::int32_t, std::pair<std::size_t, TimeNs>> by_iteration;  // iteration -> (ranks seen, max span)
  for (const auto& [key, entry] : by_rank) {
    if (entry.first != classes_of_rank[key.second]) continue;  // some class of the rank missed the iteration
    auto& [seen, longest] = by_iteration[key.first];
    ++seen;
    longest = std::max(longest, entry.second.span_ns());
  }
  std::vector<TimeNs> spans;
  for (const auto& [iteration, entry] : by_iteration)
    if (entry.first == classes_of_rank.size()) spans.push_back(entry.second);
  if (spans.empty()) return std::nullopt;
  return median_ns(spans);
}

nlohmann::json optional_json(const std::optional<TimeNs>& value) { return value ? nlohmann::json(*value) : nullptr; }
nlohmann::json optional_json(const std::optional<double>& value) { return value ? nlohmann::json(*value) : nullptr; }

}  // namespace

PredictedVsMeasured predicted_vs_measured(const IterationGraph& graph, const std::vector<MeasuredRank>& ranks,
                                          const PlanPrediction& prediction) {
  std::set<std::pair<int, int>> seen;
  for (const MeasuredRank& rank : ranks) {
    if (!seen.insert({rank.rank, rank.rank_class}).second)
      throw std::invalid_argument(
          fmt::format("predicted_vs_measured: rank {} with class {} is listed twice", rank.rank, rank.rank_class));
    check_rank(graph, rank, prediction);
  }

  PredictedVsMeasured comparison;
  comparison.predicted_iteration_ns = prediction.iteration_ns;
  comparison.measured_iteration_ns = slowest_rank_median(ranks);
  comparison.error = relative_error(comparison.measured_iteration_ns, comparison.predicted_iteration_ns);

  std::array<KindComparison, kOpKindCount> kinds{};
  for (int k = 0; k < kOpKindCount; ++k) kinds[k].kind = static_cast<OpKind>(k);
  for (const MeasuredRank& rank : ranks) {
    const auto rank_class = static_cast<std::size_t>(rank.rank_class);
    const TimeNs predicted_finish_ns = prediction.class_finish_ns[rank_class];
    comparison.ranks.push_back({rank.rank, rank.rank_class, predicted_finish_ns, rank.median_iteration_ns,
                                relative_error(rank.median_iteration_ns, predicted_finish_ns)});
    const RankClass& ops = graph.classes[rank_class];
    for (OpIndex i = 0; i < ops.size(); ++i) {
      KindComparison& kind = kinds[static_cast<int>(ops.op(i).kind)];
      const TimeNs predicted_ns = prediction.ops[rank_class][i].duration_ns;
      if (!rank.ops[i].median_ns) {
        ++kind.unmeasured_ops;
        kind.unmeasured_predicted_ns += predicted_ns;
        continue;
      }
      ++kind.ops;
      kind.predicted_ns += predicted_ns;
      kind.measured_ns += *rank.ops[i].median_ns;
    }
  }
  std::sort(comparison.ranks.begin(), comparison.ranks.end(),
            [](const RankComparison& a, const RankComparison& b) {
              return std::pair(a.rank, a.rank_class) < std::pair(b.rank, b.rank_class);
            });

  for (KindComparison& kind : kinds) {
    if (kind.ops == 0 && kind.unmeasured_ops == 0) continue;
    if (kind.ops > 0) kind.error = relative_error(kind.measured_ns, kind.predicted_ns);
    comparison.kinds.push_back(kind);
  }
  // Kinds are appended in enum order, so a stable sort breaks ties by kind.
  std::stable_sort(comparison.kinds.begin(), comparison.kinds.end(), [](const KindComparison& a, const KindComparison& b) {
    return std::llabs(a.error_contribution_ns()) > std::llabs(b.error_contribution_ns());
  });
  return comparison;
}

nlohmann::json to_json(const PredictedVsMeasured& comparison) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankComparison& rank : comparison.ranks)
    ranks.push_back({{"rank", rank.rank},
                     {"rank_class", rank.rank_class},
                     {"predicted_ns", rank.predicted_ns},
                     {"measured_median_ns", optional_json(rank.measured_ns)},
                     {"error", optional_json(rank.error)}});
  nlohmann::json kinds = nlohmann::json::array();
  for (const KindComparison& kind : comparison.kinds)
    kinds.push_back({{"kind", to_string(kind.kind)},
                     {"ops", kind.ops},
                     {"predicted_ns", kind.predicted_ns},
                     {"measured_ns", kind.measured_ns},
                     {"error_contribution_ns", kind.error_contribution_ns()},
                     {"error", optional_json(kind.error)},
                     {"unmeasured_ops", kind.unmeasured_ops},
                     {"unmeasured_predicted_ns", kind.unmeasured_predicted_ns}});
  return {{"predicted_iteration_ns", comparison.predicted_iteration_ns},
          {"measured_iteration_ns", optional_json(comparison.measured_iteration_ns)},
          {"error", optional_json(comparison.error)},
          {"ranks", std::move(ranks)},
          {"kinds", std::move(kinds)}};
}

}  // namespace twin
