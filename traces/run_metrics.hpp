// metrics.json of an executed run ("format": "twin-execute-run", written by executor/run_report.cpp), read
// back with every field checked: by `twin report` and by `twin calibrate --from-trace`, which must accept
// the same folders.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/units.hpp"

namespace twin {

struct StepMetrics {
  int step = 0;                 // 1-based, warm-up steps included
  std::optional<double> loss;   // empty where the run recorded none (NaN is written as null)
  TimeNs iteration_ns = 0;      // the slowest rank's CUDA-event time of the step
  bool measured = false;        // false for warm-up steps
};

struct RankMetrics {
  int rank = 0;
  int rank_class = 0;
  TimeNs median_step_ns = 0;                  // median CUDA-event time of its measured steps
  std::optional<TimeNs> kernel_span_ns;       // median first-kernel-to-last-kernel span (kernel_span.ranks)
  double peak_memory_GiB = 0;
  double predicted_peak_memory_GiB = 0;
};

// An MoE run's measured routing (metrics.json's "moe_routing").
struct MeasuredRouting {
  int num_experts = 0, top_k = 0;
  std::int64_t tokens_per_micro_batch = 0;
  std::int64_t samples = 0;    // (micro-batch, MoE layer) routings over the measured steps and all ranks
  double imbalance_mean = 1.0;  // their mean busiest-expert load over the mean load
};

// metrics.json ("format": "twin-execute-run", executor/run_report.hpp).
struct RunMetrics {
  std::string scenario, strategy, device;
  int world_size = 1;
  int warmup_iterations = 0;
  std::optional<double> loss_first, loss_last;
  TimeNs measured_iteration_ns = 0;           // median of the measured steps
  double measured_tokens_per_s = 0;
  double measured_mfu = 0;
  std::optional<TimeNs> kernel_span_iteration_ns;  // kernel_span.measured_iteration_ns
  std::optional<std::string> attention;        // the attention implementation the run used (absent before 2026-11-24)
  nlohmann::json kernel_revisions;             // core/kernel_revisions.hpp, by kind name (null before 2026-11-25)
  std::vector<StepMetrics> steps;
  std::vector<RankMetrics> ranks;             // by rank
  std::optional<MeasuredRouting> moe_routing;  // MoE models only
};

RunMetrics parse_run_metrics(const nlohmann::json& metrics, const std::string& source);

}  // namespace twin
