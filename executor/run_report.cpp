// Per-rank files are plain JSON: the kernel records as columns (names interned) so that a 20-iteration
// run of a few thousand kernels stays a few MB. Rank 0 re-reads them all; nothing here touches the GPU.
#include "executor/run_report.hpp"

#include <algorithm>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/kernel_revisions.hpp"
#include "strategies/families/rank_plan.hpp"
#include "strategies/flops.hpp"
#include "strategies/memory.hpp"
#include "traces/measured_trace.hpp"
#include "traces/ops_csv.hpp"
#include "traces/plan_prediction.hpp"
#include "traces/predicted_vs_measured.hpp"

namespace twin::exec {
namespace {

using nlohmann::json;

// "rank3", or "rank3_part1" in a step of several parts.
std::string rank_stem(int rank, int part, int parts) {
  return parts > 1 ? fmt::format("rank{}_part{}", rank, part) : fmt::format("rank{}", rank);
}

std::filesystem::path rank_file(const std::filesystem::path& run_dir, int rank, int part, int parts) {
  return run_dir / "measured" / (rank_stem(rank, part, parts) + ".json");
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

json expert_loads_json(const std::vector<ExpertLoad>& loads) {
  json iteration = json::array(), micro_batch = json::array(), layer = json::array(), tokens = json::array();
  for (const ExpertLoad& load : loads) {
    iteration.push_back(load.iteration);
    micro_batch.push_back(load.micro_batch);
    layer.push_back(load.layer);
    tokens.push_back(load.tokens_per_expert);
  }
  return {{"iteration", iteration}, {"micro_batch", micro_batch}, {"layer", layer}, {"tokens_per_expert", tokens}};
}

std::vector<ExpertLoad> expert_loads_from(const json& j) {
  std::vector<ExpertLoad> loads;
  for (std::size_t i = 0; i < j.at("layer").size(); ++i)
    loads.push_back({j.at("iteration").at(i), j.at("micro_batch").at(i), j.at("layer").at(i),
                     j.at("tokens_per_expert").at(i).get<std::vector<std::int64_t>>()});
  return loads;
}

// The measured routing of all ranks: its imbalance per (micro-batch, layer) sample, their mean and largest.
json moe_routing_json(const Scenario& scenario, const Strategy& strategy, const std::vector<RankRun>& runs) {
  std::vector<double> samples;
  std::map<int, std::vector<double>> per_layer;
  for (const RankRun& run : runs)
    for (const ExpertLoad& load : run.expert_loads) {
      samples.push_back(routing_imbalance(load));
      per_layer[load.layer].push_back(samples.back());
    }
  const auto mean = [](const std::vector<double>& v) {
    double sum = 0;
    for (double x : v) sum += x;
    return v.empty() ? 0.0 : sum / static_cast<double>(v.size());
  };
  json layers = json::array();
  for (const auto& [layer, values] : per_layer)
    layers.push_back({{"layer", layer}, {"imbalance_mean", mean(values)},
                      {"imbalance_max", *std::max_element(values.begin(), values.end())}});
  return {{"definition", "tokens routed to the busiest expert over the mean, per micro-batch and MoE layer"},
          {"num_experts", scenario.model.moe.num_experts},
          {"top_k", scenario.model.moe.top_k},
          // What one sample routes: a micro-batch's tokens on one rank (its 1/tp under SP, its 1/cp under CP).
          {"tokens_per_micro_batch",
           static_cast<std::int64_t>(strategy.micro_batch_size) * scenario.training.seq_length /
               strategy.context_parallel_size / (strategy.sequence_parallel ? strategy.tensor_model_parallel_size : 1)},
          {"samples", samples.size()},
          {"imbalance_mean", mean(samples)},
          {"imbalance_max", samples.empty() ? 0.0 : *std::max_element(samples.begin(), samples.end())},
          {"scenario_routing_imbalance", scenario.model.moe.imbalance()},
          {"aux_loss_last", runs.front().aux_losses.empty() ? 0.0 : runs.front().aux_losses.back()},
          {"per_layer", layers}};
}

// A hot-switching part's switch into its layout, measured (median over the measured iterations) and predicted:
// from the class's first op to the end of its last transfer of weights or gradients (the prediction's op times).
json switch_json(const RankClass& rc, const std::vector<PredictedOpTime>& times, const RankRun& run, int warmup) {
  TimeNs first = std::numeric_limits<TimeNs>::max(), last_transfer = 0;
  for (OpIndex i = 0; i < rc.size(); ++i) {
    first = std::min(first, times.at(i).start_ns);
    if (is_switch_transfer(rc.op(i)))
      last_transfer = std::max(last_transfer, times.at(i).start_ns + times.at(i).duration_ns);
  }
  const double predicted_s = last_transfer > first ? static_cast<double>(last_transfer - first) / 1e9 : 0.0;
  const auto skip = std::min<std::size_t>(static_cast<std::size_t>(warmup), run.switch_s.size());
  return {{"median_s", median(std::vector<double>(run.switch_s.begin() + static_cast<std::ptrdiff_t>(skip),
                                                  run.switch_s.end()))},
          {"predicted_s", predicted_s}};
}

}  // namespace

double routing_imbalance(const ExpertLoad& load) {
  std::int64_t total = 0, busiest = 0;
  for (std::int64_t tokens : load.tokens_per_expert) {
    total += tokens;
    busiest = std::max(busiest, tokens);
  }
  if (total == 0) return 1.0;
  return static_cast<double>(busiest) * static_cast<double>(load.tokens_per_expert.size()) / static_cast<double>(total);
}

void write_rank_run(const std::filesystem::path& run_dir, const RankRun& run, const RankClass& rank_class, int warmup) {
  std::map<std::string, int> name_index;
  json names = json::array(), start = json::array(), end = json::array(), stream = json::array(),
       iteration = json::array(), op = json::array(), name = json::array();
  for (const MeasuredKernel& k : run.kernels) {
    auto [it, added] = name_index.emplace(k.name, static_cast<int>(name_index.size()));
    if (added) names.push_back(k.name);
    name.push_back(it->second);
    start.push_back(k.start_ns);
    end.push_back(k.end_ns);
    stream.push_back(k.stream_id);
    iteration.push_back(k.iteration);
    op.push_back(k.in_op() ? static_cast<std::int64_t>(k.op) : -1);
  }
  const json document = {{"format", "twin-measured-rank"},
                         {"version", 1},
                         {"rank", run.rank},
                         {"part", run.part},
                         {"parts", run.parts},
                         {"rank_class", run.rank_class},
                         {"coordinates", {{"tp", run.coordinates[0]}, {"cp", run.coordinates[1]},
                                          {"dp", run.coordinates[2]}, {"pp", run.coordinates[3]}}},
                         {"device", run.device},
                         {"warmup_iterations", warmup},
                         {"losses", run.losses},
                         {"iteration_s", run.iteration_s},
                         {"grad_norms", run.grad_norms},
                         {"learning_rates", run.learning_rates},
                         {"switch_s", run.switch_s},
                         {"peak_memory_bytes", run.peak_memory_bytes},
                         {"dropped_records", run.dropped_records},
                         {"expert_loads", expert_loads_json(run.expert_loads)},
                         {"aux_losses", run.aux_losses},
                         {"kernel_names", names},
                         {"kernels", {{"name", name}, {"start_ns", start}, {"end_ns", end}, {"stream", stream},
                                      {"iteration", iteration}, {"op", op}}}};
  std::filesystem::create_directories(run_dir / "measured");
  write_file_atomically(rank_file(run_dir, run.rank, run.part, run.parts), document.dump());
  if (!run.kernels.empty()) {
    std::filesystem::create_directories(run_dir / "traces");
    write_measured_chrome_trace(run_dir / "traces" / ("measured_" + rank_stem(run.rank, run.part, run.parts) + ".json"),
                                rank_class, run.rank, run.kernels,
                                run.parts > 1 ? fmt::format("measured, rank {}, part {}", run.rank, run.part)
                                              : fmt::format("measured, rank {}", run.rank));
  }
}

namespace {

// A vector of numbers as write_rank_run wrote it: JSON has no NaN, so a diverged step's loss or gradient norm was
// written as null; it reads back as NaN, so that a run that diverged still has its report.
std::vector<double> numbers_or_nan(const json& values) {
  std::vector<double> out;
  out.reserve(values.size());
  for (const json& v : values) out.push_back(v.is_null() ? std::numeric_limits<double>::quiet_NaN() : v.get<double>());
  return out;
}

}  // namespace

RankRun read_rank_run(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path.string(), "", "a rank's measurements (the file cannot be read)");
  const json d = json::parse(in, nullptr, false);
  if (d.is_discarded() || d.value("format", "") != "twin-measured-rank")
    throw InputError(path.string(), "/format", "\"twin-measured-rank\"");
  RankRun run;
  run.rank = d.at("rank");
  run.part = d.value("part", 0);
  run.parts = d.value("parts", 1);
  run.rank_class = d.at("rank_class");
  const json& c = d.at("coordinates");
  run.coordinates = {c.at("tp"), c.at("cp"), c.at("dp"), c.at("pp")};
  run.device = d.at("device");
  run.losses = numbers_or_nan(d.at("losses"));
  run.iteration_s = d.at("iteration_s").get<std::vector<double>>();
  if (d.contains("grad_norms")) run.grad_norms = numbers_or_nan(d.at("grad_norms"));
  if (d.contains("learning_rates")) run.learning_rates = d.at("learning_rates").get<std::vector<double>>();
  if (d.contains("switch_s")) run.switch_s = d.at("switch_s").get<std::vector<double>>();
  run.peak_memory_bytes = d.at("peak_memory_bytes");
  run.dropped_records = d.at("dropped_records");
  if (d.contains("expert_loads")) run.expert_loads = expert_loads_from(d.at("expert_loads"));
  if (d.contains("aux_losses")) run.aux_losses = numbers_or_nan(d.at("aux_losses"));
  const auto names = d.at("kernel_names").get<std::vector<std::string>>();
  const json& k = d.at("kernels");
  for (std::size_t i = 0; i < k.at("name").size(); ++i) {
    MeasuredKernel kernel;
    kernel.name = names.at(k["name"][i].get<std::size_t>());
    kernel.start_ns = k["start_ns"][i];
    kernel.end_ns = k["end_ns"][i];
    kernel.stream_id = k["stream"][i];
    kernel.iteration = k["iteration"][i];
    const std::int64_t op = k["op"][i];
    kernel.op = op < 0 ? kNoOp : static_cast<OpIndex>(op);
    run.kernels.push_back(std::move(kernel));
  }
  return run;
}

namespace {

// steps.csv, and the same rows for metrics.json: a step lasts as long as its slowest rank.
json write_steps(const std::filesystem::path& run_dir, const std::vector<RankRun>& runs, int warmup,
                 const std::function<Throughput(double)>& throughput) {
  const RankRun& first = runs.front();
  const std::size_t steps = first.iteration_s.size();
  std::vector<double> step_s(steps, 0);
  for (const RankRun& run : runs)
    for (std::size_t i = 0; i < steps; ++i) step_s[i] = std::max(step_s[i], run.iteration_s.at(i));
  const auto at = [](const std::vector<double>& values, std::size_t i) {  // older files: no column
    return i < values.size() ? fmt::format("{:.6g}", values[i]) : std::string();
  };
  std::string steps_csv = "step,loss,iteration_s,tokens_per_s,mfu,measured,lr,grad_norm\r\n";
  json steps_json = json::array();
  for (std::size_t i = 0; i < steps; ++i) {
    const Throughput t = throughput(step_s[i]);
    const bool measured = static_cast<int>(i) >= warmup;
    steps_csv += fmt::format("{},{:.6f},{:.6f},{:.1f},{:.4f},{},{},{}\r\n", i + 1, first.losses[i], step_s[i],
                             t.tokens_per_s, t.mfu, measured ? "true" : "false", at(first.learning_rates, i),
                             at(first.grad_norms, i));
    steps_json.push_back({{"step", i + 1}, {"loss", first.losses[i]}, {"iteration_s", step_s[i]},
                          {"tokens_per_s", t.tokens_per_s}, {"mfu", t.mfu}, {"measured", measured}});
    if (i < first.grad_norms.size())
      steps_json.back().update({{"lr", first.learning_rates.at(i)}, {"grad_norm", first.grad_norms[i]}});
  }
  write_file_atomically(run_dir / "steps.csv", steps_csv);
  return steps_json;
}

// Per rank (and part): its peak memory against the memory model's (with the attention engine's scratch beyond the
// default's), its median step, a hot-switching part's switch.
json ranks_json(const Plan& plan, const PlanGraphs& lowered, const std::vector<RankRun>& runs, int warmup,
                const std::string& attention) {
  const AttentionImplementation engine =
      attention_implementation_from_string(attention).value_or(kDefaultAttentionImplementation);
  json ranks = json::array();
  for (const RankRun& run : runs) {
    const MemoryEstimate& memory = lowered.parts.at(static_cast<std::size_t>(run.part)).memory;
    const MemoryBreakdown& stage_memory =
        memory.per_stage.at(predicted_memory_entry(lowered, run.rank_class, run.coordinates[3]));
    const Bytes engine_scratch =
        attention_scratch_beyond_default(lowered.graph.classes.at(static_cast<std::size_t>(run.rank_class)), engine);
    ranks.push_back({{"rank", run.rank}, {"part", run.part}, {"rank_class", run.rank_class}, {"device", run.device},
                     {"peak_memory_GiB", static_cast<double>(run.peak_memory_bytes) / kGiB},
                     {"predicted_peak_memory_GiB", static_cast<double>(stage_memory.total() + engine_scratch) / kGiB},
                     // What peak_memory_GiB counts: without the CUDA context and NCCL's buffers.
                     {"predicted_allocated_peak_GiB",
                      static_cast<double>(stage_memory.allocated() + engine_scratch) / kGiB},
                     {"attention_engine_scratch_GiB", static_cast<double>(engine_scratch) / kGiB},
                     {"median_iteration_s", median(std::vector<double>(run.iteration_s.begin() + warmup,
                                                                       run.iteration_s.end()))},
                     {"dropped_kernel_records", run.dropped_records}});
    if (!run.switch_s.empty())
      ranks.back()["switch"] = switch_json(lowered.graph.classes.at(static_cast<std::size_t>(run.rank_class)),
                                           predicted_op_times(plan.document, run.rank_class, plan.scenario.source), run,
                                           warmup);
  }
  return ranks;
}

// Op by op, where the kernels were traced: ops.csv and predicted_vs_measured.json; the comparison's summary.
json write_op_tables(const std::filesystem::path& run_dir, const Plan& plan, const IterationGraph& graph,
                     const std::vector<RankRun>& runs) {
  std::vector<MeasuredRank> joined;
  for (const RankRun& run : runs)
    joined.push_back(join_measured_ops(graph.classes.at(run.rank_class), run.kernels, run.rank));
  const PlanPrediction prediction = read_plan_prediction(plan.document, graph, plan.scenario.source);
  write_file_atomically(run_dir / "ops.csv", ops_csv(graph, joined, prediction));
  const PredictedVsMeasured comparison = predicted_vs_measured(graph, joined, prediction);
  write_file_atomically(run_dir / "predicted_vs_measured.json", to_json(comparison).dump(1));
  return to_json(comparison);
}

}  // namespace

void write_run_summary(const std::filesystem::path& run_dir, const Plan& plan, const PlanGraphs& lowered,
                       int world_size, int warmup, const std::string& attention) {
  const IterationGraph& graph = lowered.graph;
  const int parts = static_cast<int>(lowered.parts.size());
  std::vector<RankRun> runs;  // rank-major, then part
  for (int rank = 0; rank < world_size; ++rank)
    for (int part = 0; part < parts; ++part) runs.push_back(read_rank_run(rank_file(run_dir, rank, part, parts)));
  const Scenario& scenario = plan.scenario;
  const Strategy& strategy = plan.strategy;
  const auto throughput = [&](double seconds) { return lowered.throughput(seconds); };

  const json steps_json = write_steps(run_dir, runs, warmup, throughput);
  const std::size_t steps = steps_json.size();
  std::vector<double> measured_steps;
  for (const json& step : steps_json)
    if (step.at("measured").get<bool>()) measured_steps.push_back(step.at("iteration_s").get<double>());
  const double measured_s = median(measured_steps);
  const Throughput measured = throughput(measured_s);
  const json predicted = plan.document.at("predicted");
  const json ranks = ranks_json(plan, lowered, runs, warmup, attention);
  json metrics = {{"format", "twin-execute-run"},
                  {"strategy", strategy.key()},
                  {"family", lowered.family()},
                  {"plan", lowered.key},
                  {"scenario", scenario.name},
                  {"world_size", world_size},
                  {"device", runs.front().device},
                  {"iterations", steps},
                  {"warmup_iterations", warmup},
                  {"precision", "bf16 parameters and activations, AdamW state: " +
                                    to_string(scenario.training.optimizer_precision) +
                                    " (main_params bf16: no master copy), fp32 accumulation in GEMMs and reductions, "
                                    "bf16 gradient reduction"},
                  {"attention", attention},
                  {"kernel_revisions", executor_kernel_revisions_json()},
                  {"loss_first", runs.front().losses.front()},
                  {"loss_last", runs.front().losses.back()},
                  {"measured", {{"iteration_s", measured_s}, {"tokens_per_s", measured.tokens_per_s},
                                {"mfu", measured.mfu}, {"hfu", measured.hfu}}},
                  {"predicted", predicted},
                  {"ranks", ranks},
                  {"steps", steps_json}};
  if (scenario.model.is_moe()) metrics["moe_routing"] = moe_routing_json(scenario, strategy, runs);

  if (!runs.front().kernels.empty()) metrics["kernel_span"] = write_op_tables(run_dir, plan, graph, runs);
  write_file_atomically(run_dir / "metrics.json", metrics.dump(1));

  const double predicted_s = predicted.at("iteration_time_s").get<double>();
  std::printf("%s on %d x %s: loss %.3f -> %.3f over %zu steps\n", lowered.key.c_str(), world_size,
              runs.front().device.c_str(), runs.front().losses.front(), runs.front().losses.back(), steps);
  std::printf("measured iteration %.4f s (median of %zu), %.0f tokens/s, MFU %.1f%%; predicted %.4f s (%+.1f%%)\n",
              measured_s, measured_steps.size(), measured.tokens_per_s, 100 * measured.mfu, predicted_s,
              100 * (measured_s / predicted_s - 1));
  std::printf("wrote %s/{metrics.json,steps.csv,ops.csv,predicted_vs_measured.json,measured/,traces/}\n",
              run_dir.string().c_str());
}

}  // namespace twin::exec
