// The numbers of `twin report`: predicted against measured for an executed plan, per step, per op kind,
// per collective (kind, communicator), per rank, and the (kind, role, phase, layer) groups of ops that
// contribute most to the difference. Plain functions over the plan's graph, its prediction and the
// measured ops (ops.csv); sums stay integer nanoseconds and errors come from sums, never from averaged ratios.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "core/op_graph.hpp"
#include "reports/execution_run.hpp"
#include "traces/measured_ops.hpp"
#include "traces/plan_prediction.hpp"
#include "traces/predicted_vs_measured.hpp"

namespace twin {

struct StepComparison {
  int step = 0;
  std::optional<double> loss;
  TimeNs measured_ns = 0;
  TimeNs predicted_ns = 0;         // the plan's iteration time: the same for every step
  bool warmup = false;
  std::optional<double> error;     // measured / predicted - 1
};

// Every collective or point-to-point op of one kind on one communicator, over every measured rank.
struct CollectiveComparison {
  OpKind kind = OpKind::all_reduce;
  GroupKind group = GroupKind::none;
  int ops = 0;                     // ops measured (with a kernel)
  int unmeasured_ops = 0;
  Bytes bytes = 0;                 // message bytes of the measured ops
  TimeNs predicted_ns = 0;         // of the measured ops
  TimeNs measured_ns = 0;
  std::optional<double> error;
};

struct RankRow {
  int rank = 0;
  int rank_class = 0;
  TimeNs predicted_ns = 0;                  // the class's predicted finish
  std::optional<TimeNs> measured_span_ns;   // median kernel span
  std::optional<double> error;
  TimeNs median_step_ns = 0;                // CUDA-event step time
  double peak_memory_GiB = 0;
  double predicted_peak_memory_GiB = 0;
};

// Ops of one (kind, role, phase, layer) over every micro-batch and measured rank.
struct ContributorGroup {
  OpKind kind = OpKind::gemm;
  OpRole role = OpRole::none;
  Phase phase = Phase::forward;
  int layer = -1;
  int ops = 0;
  TimeNs predicted_ns = 0;
  TimeNs measured_ns = 0;
  TimeNs difference_ns() const { return measured_ns - predicted_ns; }
  std::string label() const;  // "L2.core_attention.bwd", "optimizer.opt" (op_name without the micro-batch)
};

// One measured op of one rank, for the scatter.
struct OpPoint {
  int rank = 0;
  int rank_class = 0;
  OpIndex op = 0;
  OpKind kind = OpKind::gemm;
  TimeNs predicted_ns = 0;
  TimeNs measured_ns = 0;
};

struct ExecutionSummary {
  TimeNs predicted_iteration_ns = 0;
  TimeNs measured_iteration_ns = 0;              // median measured step (CUDA events)
  std::optional<double> error;
  std::optional<TimeNs> measured_kernel_span_ns; // median over iterations of the slowest rank's kernel span
  std::vector<StepComparison> steps;
  std::vector<KindComparison> kinds;             // by |measured - predicted| descending
  std::vector<CollectiveComparison> collectives; // by kind, then communicator
  std::vector<RankRow> ranks;                    // by rank
  std::vector<ContributorGroup> contributors;    // the largest |difference| first, at most `top` of them
  TimeNs measured_op_predicted_ns = 0;           // sums over every measured op of every measured rank
  TimeNs measured_op_measured_ns = 0;
};

inline constexpr std::size_t kTopContributors = 10;

// `ranks` as read from ops.csv (median_iteration_ns = the rank's kernel span). Throws std::invalid_argument
// where ranks and graph disagree (as predicted_vs_measured does).
ExecutionSummary summarize_execution(const IterationGraph& graph, const PlanPrediction& prediction,
                                     const std::vector<MeasuredRank>& ranks, const RunMetrics& metrics,
                                     std::size_t top = kTopContributors);
ExecutionSummary summarize_execution(const ExecutedRun& run, std::size_t top = kTopContributors);

// Each measured op with a positive predicted and measured time, by rank then op index.
std::vector<OpPoint> op_points(const IterationGraph& graph, const PlanPrediction& prediction,
                               const std::vector<MeasuredRank>& ranks);

}  // namespace twin
