// Predicted against measured for a run: iteration time per rank and overall, and per op kind the sums of
// predicted and measured op time, ranked by how much each kind contributes to the difference. This is
// what `twin execute` writes into the run folder and `twin report` shows.
#pragma once
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/op_graph.hpp"
#include "traces/measured_ops.hpp"
#include "traces/plan_prediction.hpp"

namespace twin {

struct RankComparison {
  int rank = 0;
  int rank_class = 0;
  TimeNs predicted_ns = 0;              // the class's predicted finish (its iteration from time 0)
  std::optional<TimeNs> measured_ns;    // median iteration span on this rank
  std::optional<double> error;          // measured / predicted - 1
};

// Over every measured rank's ops of one kind (a class with several measured ranks counts once per rank).
struct KindComparison {
  OpKind kind = OpKind::gemm;
  int ops = 0;                          // ops with both a prediction and a measurement
  TimeNs predicted_ns = 0;              // sum of their predicted durations
  TimeNs measured_ns = 0;               // sum of their measured medians
  int unmeasured_ops = 0;               // ops that ran no kernel (absent)
  TimeNs unmeasured_predicted_ns = 0;   // what the simulator charged for them
  std::optional<double> error;          // measured_ns / predicted_ns - 1
  TimeNs error_contribution_ns() const { return measured_ns - predicted_ns; }
};

struct PredictedVsMeasured {
  TimeNs predicted_iteration_ns = 0;           // best.json predicted/iteration_ns
  // Per iteration measured on every rank, the longest rank span; then the median over those iterations.
  std::optional<TimeNs> measured_iteration_ns;
  std::optional<double> error;
  std::vector<RankComparison> ranks;           // by rank
  std::vector<KindComparison> kinds;           // by |error_contribution_ns| descending, then kind order
};

// Throws std::invalid_argument when a rank repeats or does not match its class in `graph` or `prediction`.
PredictedVsMeasured predicted_vs_measured(const IterationGraph& graph, const std::vector<MeasuredRank>& ranks,
                                          const PlanPrediction& prediction);

// {"predicted_iteration_ns", "measured_iteration_ns", "error", "ranks": [...], "kinds": [...]}; missing
// values are null.
nlohmann::json to_json(const PredictedVsMeasured& comparison);

}  // namespace twin
