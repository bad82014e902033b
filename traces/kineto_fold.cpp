// Why two rules: a GEMM or an attention kernel has a shape twin's ops have too, so its time is an exact entry
// that nearby shapes learn from; the framework's other kernels (an unfused RMSNorm is seven of them, FSDP casts
// every parameter each step) have no op of twin's to match one by one, so only their total per step, against the
// scenario's memory-bound ops priced by the profile, says how much slower the framework runs that work.
#include "traces/kineto_fold.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>

#include <fmt/format.h>

#include "calibrate/recalibration.hpp"
#include "core/atomic_file.hpp"
#include "core/device_names.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/parallel_for.hpp"
#include "core/scenario.hpp"
#include "cost/in_situ.hpp"
#include "cost/shipped_profiles.hpp"
#include "strategies/lowering.hpp"
#include "strategies/validity.hpp"
#include "traces/kineto_classes.hpp"
#include "traces/recalibration_run.hpp"

namespace twin {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

inline constexpr std::size_t kMaxTraceFiles = 4096;

bool is_trace_file_name(const fs::path& path) {
  const std::string name = path.filename().string();
  return name.ends_with(".json") || name.ends_with(".json.gz");
}

std::vector<fs::path> trace_files(const fs::path& trace) {
  std::error_code error;
  if (!fs::is_directory(trace, error)) return {trace};
  std::vector<fs::path> files;
  for (const fs::directory_entry& entry : fs::directory_iterator(trace, error))
    if (entry.is_regular_file(error) && is_trace_file_name(entry.path())) {
      files.push_back(entry.path());
      if (files.size() > kMaxTraceFiles)
        throw InputError(trace.string(), "", fmt::format("at most {} trace files", kMaxTraceFiles));
    }
  if (files.empty()) throw InputError(trace.string(), "", "a folder of PyTorch profiler traces (*.json, *.json.gz)");
  std::sort(files.begin(), files.end());
  return files;
}

GpuSpec trace_gpu(const std::vector<ClassifiedTrace>& traces) {
  std::optional<std::string> preset;
  for (const ClassifiedTrace& t : traces) {
    if (t.device_name.empty())
      throw InputError(t.file, "/deviceProperties", "the GPU's name (torch.profiler writes it with CUDA activities)");
    const std::optional<std::string> p = gpu_preset_for_device_name(t.device_name);
    if (!p) throw InputError(t.file, "/deviceProperties/0/name", "a GPU twin has a preset for, got \"" + t.device_name + "\"");
    if (preset && *p != *preset)
      throw InputError(t.file, "/deviceProperties/0/name", fmt::format("the GPU of the other ranks ({}), got {}", *preset, *p));
    preset = p;
  }
  return *gpu_preset(*preset);
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

json step_facts_json(const std::vector<ClassifiedTrace>& traces, const std::string& run, FrameworkName framework) {
  std::vector<double> span, busy, idle, collective, overlapped;
  for (const ClassifiedTrace& t : traces)
    for (const StepFacts& s : t.steps) {
      span.push_back(s.span_ns);
      busy.push_back(s.busy_ns);
      idle.push_back(s.span_ns - s.busy_ns);
      collective.push_back(s.collective_ns);
      overlapped.push_back(s.collective_ns > 0 ? s.collective_overlapped_ns / s.collective_ns : 0);
    }
  const std::size_t steps = traces.empty() ? 0 : traces.front().steps.size();
  if (steps == 0) throw InputError(traces.front().file, "/traceEvents", "ProfilerStep#N marks with GPU work (torch.profiler's schedule)");
  return {{"source", run}, {"framework", std::string(to_string(framework))},
          {"ranks", traces.size()}, {"steps", steps},
          {"step_ms", median(span) / 1e6}, {"kernel_busy_ms", median(busy) / 1e6},
          {"host_idle_ms", median(idle) / 1e6}, {"collective_ms", median(collective) / 1e6},
          {"collective_overlapped_share", median(overlapped)}};
}

// What a trace's time is folded as, by the in-situ prior each family has (cost/profile.hpp InSituPrior): GEMMs,
// attention, and every other kernel and copy (the framework's norms, casts, optimizer and FSDP copies against the
// scenario's memory-bound ops, its optimizer step included).
enum class Family { gemm, attention, memory_bound };
inline constexpr std::array kFamilies = {Family::gemm, Family::attention, Family::memory_bound};
const char* family_name(Family f) {
  switch (f) {
    case Family::gemm: return "gemm";
    case Family::attention: return "attention";
    case Family::memory_bound: return "memory_bound";
  }
  return "unknown";
}
Family family_of(TraceClass c) {
  if (c == TraceClass::gemm) return Family::gemm;
  if (c == TraceClass::attention_forward || c == TraceClass::attention_backward) return Family::attention;
  return Family::memory_bound;
}
Family family_of(const Op& op) {
  if (op.kind == OpKind::gemm || op.kind == OpKind::moe_router) return Family::gemm;
  if (op.kind == OpKind::attention_forward || op.kind == OpKind::attention_backward) return Family::attention;
  return Family::memory_bound;
}
double& prior_of(InSituPrior& prior, Family f) {
  switch (f) {
    case Family::gemm: return prior.gemm;
    case Family::attention: return prior.attention;
    case Family::memory_bound: return prior.memory_bound;
  }
  return prior.memory_bound;
}

// Per rank and step: the framework's GPU time of a family (NCCL, copies and unmatched kernels in none).
double traced_ns_per_step(const std::vector<ClassifiedTrace>& traces, Family family) {
  double total = 0, steps = 0;
  for (const ClassifiedTrace& t : traces) {
    for (int c = 0; c < kTraceClassCount; ++c) {
      const auto cls = static_cast<TraceClass>(c);
      if (cls != TraceClass::collective && cls != TraceClass::unmatched && family_of(cls) == family)
        total += t.classes[static_cast<std::size_t>(c)].busy_ns;
    }
    steps += static_cast<double>(t.steps.size());
  }
  return steps > 0 ? total / steps : 0;
}

// The compute ops of rank 0's class of the scenario: what the trace's work per step stands against.
std::vector<Op> scenario_compute_ops(const std::string& scenario_path, const Profile& profile, const GpuSpec& gpu) {
  Scenario scenario = load_scenario(scenario_path);
  if (!scenario.strategy)
    throw InputError(scenario_path, "/strategy", "the traced run's strategy, pinned (a search describes no one run)");
  Strategy strategy = *scenario.strategy;
  if (const std::optional<std::string> invalid = complete_strategy(scenario, strategy))
    throw InputError(scenario_path, "/strategy", "a valid strategy: " + *invalid);
  const IterationGraph graph = lower_to_op_graphs(scenario, strategy, profile);
  const RankClass& first = graph.classes.front();
  const GpuSpec& class_gpu = scenario.cluster.node_groups.at(static_cast<std::size_t>(first.node_group)).gpu;
  if (class_gpu.name != gpu.name)
    throw InputError(scenario_path, "/cluster", fmt::format("the traced GPU, {}; the scenario's is {}", gpu.name, class_gpu.name));
  std::vector<Op> ops;
  for (OpIndex i = 0; i < first.size(); ++i)
    if (!first.op(i).is_communication()) ops.push_back(first.op(i));
  return ops;
}

double priced_ns(const Profile& profile, const GpuSpec& gpu, const std::vector<Op>& ops, Family family) {
  double total = 0;
  for (const Op& op : ops)
    if (family_of(op) == family) total += static_cast<double>(compute_time_ns(profile, gpu, op));
  return total;
}

// Rule for the families the trace gave no shapes of (always the memory-bound one; GEMMs and attention where the
// framework's ops record none): the prior that prices the scenario's ops of the family at the traced time per
// step. A few fixed-point steps, since each op's launch overhead does not scale with it.
void fold_priors(Recalibration& result, const KinetoFoldRequest& request, const GpuSpec& gpu,
                 const std::vector<ClassifiedTrace>& traces, const std::vector<Op>& ops, const RunMeasurements& shaped,
                 json& effect) {
  const auto at = std::find_if(result.profile.gpus.begin(), result.profile.gpus.end(),
                               [&](const GpuKernelProfile& g) { return g.gpu == gpu.name; });
  const std::size_t index = static_cast<std::size_t>(at - result.profile.gpus.begin());
  json priors = json::object();
  for (Family family : kFamilies) {
    const bool has_shapes = std::any_of(shaped.samples.begin(), shaped.samples.end(),
                                        [&](const MeasuredOpSample& s) { return family_of(s.op) == family; });
    const double traced_ns = traced_ns_per_step(traces, family);
    const double priced_before_ns = priced_ns(result.profile, gpu, ops, family);
    if (has_shapes || !(traced_ns > 0) || !(priced_before_ns > 0)) continue;
    double& prior = prior_of(at->in_situ_prior, family);
    const double old_prior = prior;
    for (int step = 0; step < 4; ++step)
      prior = std::clamp(prior * traced_ns / priced_ns(result.profile, gpu, ops, family), 0.1, 10.0);  // the file's range
    result.changes.push_back({fmt::format("/gpus/{}/in_situ_prior/{}", index, family_name(family)), old_prior, prior, 0,
                              fmt::format("the framework's {} kernels took {:.3f} ms a step against {:.3f} ms for the {} "
                                          "ops of {} priced by the profile", family_name(family), traced_ns / 1e6,
                                          priced_before_ns / 1e6, family_name(family), request.scenario)});
    priors[family_name(family)] = {{"traced_ms_per_step", traced_ns / 1e6}, {"priced_ms_per_step", priced_before_ns / 1e6},
                                   {"old", old_prior}, {"new", prior}};
  }
  effect["priors"] = priors;
  effect["scenario"] = request.scenario;
}

json classes_json(const std::vector<ClassifiedTrace>& traces) {
  double total = 0;
  for (const ClassifiedTrace& t : traces) total += t.total_ns();
  json classes = json::object();
  for (int c = 0; c < kTraceClassCount; ++c) {
    ClassTotals sum;
    for (const ClassifiedTrace& t : traces) {
      const ClassTotals& part = t.classes[static_cast<std::size_t>(c)];
      sum.activities += part.activities;
      sum.busy_ns += part.busy_ns;
      for (const auto& [on, value] : part.matched_on) {
        sum.matched_on[on].first += value.first;
        sum.matched_on[on].second += value.second;
      }
    }
    std::vector<std::pair<double, std::string>> by_time;
    for (const auto& [on, value] : sum.matched_on) by_time.emplace_back(-value.second, on);
    std::sort(by_time.begin(), by_time.end());
    json matched = json::array();
    for (std::size_t i = 0; i < std::min<std::size_t>(by_time.size(), 8); ++i)
      matched.push_back({{"matched_on", by_time[i].second}, {"activities", sum.matched_on[by_time[i].second].first},
                         {"ms", -by_time[i].first / 1e6}});
    classes[to_string(static_cast<TraceClass>(c))] = {
        {"activities", sum.activities}, {"ms", sum.busy_ns / 1e6},
        {"share", total > 0 ? sum.busy_ns / total : 0}, {"matched_on", matched}};
  }
  return classes;
}

}  // namespace

bool is_kineto_trace_path(const fs::path& path) {
  std::error_code error;
  if (fs::is_directory(path, error)) return !fs::exists(path / "best.json", error);
  return is_trace_file_name(path);
}

KinetoFoldOutcome fold_kineto_trace(const KinetoFoldRequest& request) {
  const std::vector<fs::path> files = trace_files(request.trace);
  std::vector<std::unique_ptr<ClassifiedTrace>> read(files.size());
  parallel_for(files.size(), request.jobs > 0 ? request.jobs : 4,
               [&](std::size_t k) { read[k] = std::make_unique<ClassifiedTrace>(classify_trace(read_kineto_trace(files[k]))); });
  std::vector<ClassifiedTrace> traces;
  for (auto& t : read) traces.push_back(std::move(*t));
  const GpuSpec gpu = trace_gpu(traces);
  const Profile before = load_profile(request.profile);
  const std::string run = "trace:" + fs::weakly_canonical(request.trace).generic_string();

  RunMeasurements measured;
  measured.run = run;
  for (const ClassifiedTrace& t : traces)
    for (const ShapedTraceOp& s : t.shaped) {
      MeasuredOpSample sample;
      sample.op = s.op;
      sample.gpu = gpu;
      sample.rank = t.rank;
      // The simulator slows compute beside NCCL by the profile's factor: the sample is its time alone.
      const double slowdown = std::max(before.overlap.compute_slowdown, 1.0);
      sample.measured_ns = std::llround(s.busy_ns - s.beside_collective_ns * (1.0 - 1.0 / slowdown));
      measured.samples.push_back(std::move(sample));
    }
  if (measured.samples.empty())
    throw InputError(request.trace.string(), "/traceEvents",
                     "GEMM or attention kernels launched by aten ops with recorded shapes (record_shapes=True)");
  Recalibration result = recalibrate(before, measured);
  json effect = {{"trace_files", files.size()}, {"ops_folded", measured.samples.size()}, {"classes", classes_json(traces)},
                 {"step_facts", step_facts_json(traces, run, request.framework)}};
  if (!request.scenario.empty())
    fold_priors(result, request, gpu, traces, scenario_compute_ops(request.scenario, before, gpu), measured, effect);
  result.profile.framework = request.framework;
  result.profile.step_facts = effect["step_facts"];
  result.changes.push_back({"/framework", std::string(to_string(before.framework)),
                            std::string(to_string(request.framework)), 0, "the framework whose trace was folded in"});

  const fs::path folder = fs::is_directory(request.trace) ? request.trace : request.trace.parent_path();
  KinetoFoldOutcome outcome = fold_destination(folder, request.profile, request.out);
  const bool replaces = !outcome.previous_path.empty();
  outcome.record = changes_json(result, run, outcome.profile_path.generic_string(), outcome.previous_path.generic_string(),
                                effect);
  const std::string previous_text = replaces ? read_input_file(outcome.profile_path, "the profile to replace") : "";
  if (replaces) write_file_atomically(outcome.previous_path, previous_text);
  write_file_atomically(outcome.changes_json, outcome.record.dump(2) + "\n");
  write_file_atomically(outcome.changes_md, changes_markdown(outcome.record));
  write_file_atomically(outcome.profile_path, to_json(result.profile).dump(2) + "\n");
  return outcome;
}

}  // namespace twin
