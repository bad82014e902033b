// What `twin execute` leaves in the run folder. Each rank writes measured/rank<r>.json (its losses,
// iteration times, peak memory and CUPTI kernel records joined to op regions) and its Chrome trace
// traces/measured_rank<r>.json; rank 0 then joins all ranks with the plan's predictions into ops.csv,
// steps.csv, predicted_vs_measured.json and metrics.json (with an MoE model, metrics.json's "moe_routing": the
// measured routing imbalance that `twin calibrate --from-trace` folds into a profile).
#pragma once
#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/op_graph.hpp"
#include "core/plan_file.hpp"
#include "strategies/families/plan_graphs.hpp"
#include "traces/measured_ops.hpp"

namespace twin::exec {

// One MoE layer's routing of one micro-batch: the routed copies each expert received.
struct ExpertLoad {
  int iteration = 0, micro_batch = 0, layer = 0;
  std::vector<std::int64_t> tokens_per_expert;
};
// The busiest expert's load over the mean (the scenario's model.moe.routing_imbalance); 1 for an empty load.
double routing_imbalance(const ExpertLoad& load);

struct RankRun {
  int rank = 0;
  int part = 0, parts = 1;  // the part of the step (a hot-switching phase) whose class this record holds
  int rank_class = 0;
  std::array<int, 4> coordinates{};  // tp, cp, dp, pp
  std::string device;
  std::vector<double> losses;        // per iteration, global mean over the batch (the same on every rank)
  std::vector<double> iteration_s;   // per iteration, this rank's CUDA-event time
  // Per iteration, the global gradient norm before clipping and the learning rate the optimizer stepped with (of
  // the step's last part that ran an optimizer op; the same on every rank). Older files: empty.
  std::vector<double> grad_norms, learning_rates;
  // Per iteration, a hot-switching part's switch into its layout: from the part's start to its last transfer
  // (executor/gpu/stage_runtime.hpp); empty for a part without one.
  std::vector<double> switch_s;
  std::size_t peak_memory_bytes = 0;
  std::uint64_t dropped_records = 0;
  std::vector<MeasuredKernel> kernels;  // measured iterations only
  std::vector<ExpertLoad> expert_loads;  // measured iterations only; MoE models
  std::vector<double> aux_losses;        // per iteration, this rank's load-balancing losses (MoE models)
};

// Atomic writes of measured/rank<r>.json and traces/measured_rank<r>.json (a step of several parts:
// rank<r>_part<p>.json, one per part).
void write_rank_run(const std::filesystem::path& run_dir, const RankRun& run, const RankClass& rank_class, int warmup);
RankRun read_rank_run(const std::filesystem::path& path);
// Rank 0, after every rank wrote its parts: the joined tables and the summary (printed too).
// `attention` names the attention implementation the run used (gpu/attention.hpp).
void write_run_summary(const std::filesystem::path& run_dir, const Plan& plan, const PlanGraphs& lowered,
                       int world_size, int warmup, const std::string& attention);

}  // namespace twin::exec
