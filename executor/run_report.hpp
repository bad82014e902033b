// What `twin execute` leaves in the run folder. Each rank writes measured/rank<r>.json (its losses,
// iteration times, peak memory and CUPTI kernel records joined to op regions) and its Chrome trace
// traces/measured_rank<r>.json; rank 0 then joins all ranks with the plan's predictions into ops.csv,
// steps.csv, predicted_vs_measured.json and metrics.json.
#pragma once
#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/op_graph.hpp"
#include "reports/best_plan.hpp"
#include "traces/measured_ops.hpp"

namespace twin::exec {

struct RankRun {
  int rank = 0;
  int rank_class = 0;
  std::array<int, 4> coordinates{};  // tp, cp, dp, pp
  std::string device;
  std::vector<double> losses;        // per iteration, global mean over the batch (the same on every rank)
  std::vector<double> iteration_s;   // per iteration, this rank's CUDA-event time
  std::size_t peak_memory_bytes = 0;
  std::uint64_t dropped_records = 0;
  std::vector<MeasuredKernel> kernels;  // measured iterations only
};

// Atomic writes of measured/rank<r>.json and traces/measured_rank<r>.json.
void write_rank_run(const std::filesystem::path& run_dir, const RankRun& run, const RankClass& rank_class, int warmup);
RankRun read_rank_run(const std::filesystem::path& path);
// Rank 0, after every rank wrote its part: the joined tables and the summary (printed too).
// `attention` names the attention implementation the run used (gpu/attention.hpp).
void write_run_summary(const std::filesystem::path& run_dir, const Plan& plan, const IterationGraph& graph,
                       int world_size, int warmup, const std::string& attention);

}  // namespace twin::exec
