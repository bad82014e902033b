// Parts measured and parts still taken from the built-in profile are both listed, so that a reader of the
// profile knows which numbers came from this machine.
#include "calibrate/gpu/calibration_profile.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "core/attention_implementation.hpp"
#include "core/kernel_revisions.hpp"
#include "gpu/launcher.hpp"

namespace twin::gpu {

using nlohmann::json;

namespace {

// The links and overlap the run measured put in place; returns the parts measured and those left estimated.
std::pair<json, json> place_links(Profile& profile, const CalibrationRun& run) {
  const auto& interference = run.facts.interference;
  std::vector<CollectiveTable> tables = run.facts.tables;
  json measured_parts = {"gemm"};
  const CollectiveTable* widest = nullptr;
  for (const CollectiveTable& t : tables)
    if (t.collective == OpKind::all_reduce && t.nodes == 1 && (!widest || t.group_size > widest->group_size)) widest = &t;
  if (widest) {
    profile.intra_node = widest->fit;
    measured_parts.push_back("intra_node (all_reduce over " + std::to_string(widest->group_size) + " GPUs)");
  }
  for (const CollectiveTable& t : tables)
    if (t.collective == OpKind::all_reduce && t.nodes > 1) profile.inter_node = t.fit;
  if (interference) {
    // The profile format holds slowdowns >= 1; the raw ratios stay in provenance.
    profile.overlap.compute_slowdown = std::max(1.0, interference->overlap.compute_slowdown);
    profile.overlap.communication_slowdown = std::max(1.0, interference->overlap.communication_slowdown);
    measured_parts.push_back("overlap");
  }
  json estimated_parts = {"launch_overhead_ns", "intra_node_pcie"};
  if (!widest) estimated_parts.push_back("intra_node");
  for (CollectiveTable& t : tables) t.gpu = run.preset_name;
  profile.collectives = tables;
  if (!tables.empty()) measured_parts.push_back("collectives");
  // Kernels (memory-bound ops, attention) are measured; what stays an estimate is listed here.
  measured_parts.push_back("memory_bound");
  measured_parts.push_back("attention_forward");
  measured_parts.push_back("attention_backward");
  if (std::none_of(tables.begin(), tables.end(), [](const CollectiveTable& t) { return t.nodes > 1; }))
    estimated_parts.push_back("inter_node");
  if (!interference) estimated_parts.push_back("overlap");
  return {measured_parts, estimated_parts};
}

}  // namespace

Profile calibrated_profile(const CalibrationRun& run, const GpuKernelProfile& kernels, const json& kernel_summary) {
  const CalibrationRequest& request = run.request;
  const RankIdentity& identity = run.identity;
  const GemmCalibration& gemms = run.gemms;
  const auto& interference = run.facts.interference;
  const std::set<std::string>& hosts = run.facts.hosts;
  const std::string& preset_name = run.preset_name;
  const GpuSpec* spec = &run.spec;
  Profile profile = builtin_profile();
  profile.gpus = {kernels};
  profile.gpus.front().grouped_gemm_issue_ns = run.facts.grouped_gemm_issue_ns;
  profile.builtin = false;
  profile.name = fmt::format("calibrated {}x {} ({})", identity.world_size, preset_name, *hosts.begin());
  const auto [measured_parts, estimated_parts] = place_links(profile, run);
  json skipped = json::array();
  for (const GemmShape& s : gemms.skipped) skipped.push_back(gemm_key(s));
  const double seconds = run.seconds;
  std::string command;
  for (const std::string& a : own_command_line()) command += (command.empty() ? "" : " ") + a;
  profile.provenance = {
      {"tool", "twin calibrate"},
      {"gpu", run.props.name},
      {"gpu_preset", preset_name},
      {"gpu_spec", {{"peak_bf16_tflops", spec->peak_bf16_tflops}, {"hbm_bandwidth_GBps", spec->hbm_bandwidth_GBps},
                    {"nvlink_bandwidth_GBps", spec->nvlink_bandwidth_GBps}}},
      {"gpu_count", identity.world_size},
      {"hosts", json(std::vector<std::string>(hosts.begin(), hosts.end()))},
      {"launcher", identity.launcher},
      {"versions", versions()},
      {"date_utc", utc_now()},
      {"command", command},
      {"quick", request.quick},
      {"scenario", request.scenario},
      {"calibration_seconds", seconds},
      {"measured", measured_parts},
      {"estimated_from_builtin", estimated_parts},
      {"gemm_timing", "CUPTI kernel spans, cuBLASLt bf16 in/out fp32 compute, random data, median/p10/p90, scaled "
                      "from the SM clock of each timing (a spinning probe kernel) to reference_sm_clock_MHz; shapes "
                      "launched back to back in batches, split over the ranks' GPUs"},
      {"gemm_reference_sm_clock_MHz", gemms.reference_sm_clock_MHz},
      {"attention", to_string(kDefaultAttentionImplementation)},
      {"kernel_revisions", executor_kernel_revisions_json()},
      {"gemm_shapes_measured", gemms.measured.size()},
      {"gemm_shapes_skipped", skipped},
      {"gemm_best_tflops", gemms.best_tflops},
      {"usable_memory", run.facts.usable_memory},
      {"collective_timing", "nccl-tests: float32, CUDA events around iterations, mean averaged over ranks"}};
  profile.provenance["kernels"] = kernel_summary;
  if (!gemms.gpu_agreement.is_null()) profile.provenance["gemm_gpu_agreement"] = gemms.gpu_agreement;
  if (interference)
    profile.provenance["interference"] = {
        {"gemm", gemm_key(interference->gemm)},
        {"all_reduce_bytes", interference->all_reduce_bytes},
        {"gemm_alone_ns", interference->gemm_alone_ns},
        {"gemm_overlapped_ns", interference->gemm_overlapped_ns},
        {"all_reduce_alone_ns", interference->all_reduce_alone_ns},
        {"all_reduce_overlapped_ns", interference->all_reduce_overlapped_ns},
        {"compute_slowdown_raw", interference->overlap.compute_slowdown},
        {"communication_slowdown_raw", interference->overlap.communication_slowdown}};
  if (!run.facts.interference_points.empty())
    profile.provenance["interference_points"] = interference_timings_json(run.facts.interference_points);
  return profile;
}

}  // namespace twin::gpu
