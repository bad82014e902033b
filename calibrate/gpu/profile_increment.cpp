// The fits are kept: a scenario's few shapes would move a model fitted on thousands, and priced shapes near the
// new ones interpolate among them anyway (docs/PROFILES.md).
#include "calibrate/gpu/profile_increment.hpp"

#include <set>
#include <string>

#include <fmt/format.h>

#include "calibrate/gpu/gemm_calibration.hpp"
#include "core/error.hpp"
#include "gpu/launcher.hpp"

namespace twin::gpu {
namespace {

GpuKernelProfile& kernels_of(Profile& profile, const std::string& path, const std::string& preset_name) {
  for (GpuKernelProfile& kernels : profile.gpus)
    if (kernels.gpu == preset_name) return kernels;
  std::string described;
  for (const GpuKernelProfile& kernels : profile.gpus) described += (described.empty() ? "" : ", ") + kernels.gpu;
  throw InputError(path, "/gpus", fmt::format("the kernels of {} (this machine's GPU), got those of {}", preset_name,
                                              described.empty() ? "no GPU" : described));
}

}  // namespace

ProfileIncrement profile_increment(const std::string& profile, const std::string& scenario,
                                   const std::string& preset_name) {
  ProfileIncrement increment;
  increment.path = profile;
  increment.base = load_profile(profile);
  const GpuKernelProfile& kernels = kernels_of(increment.base, profile, preset_name);
  if (kernels.reference_sm_clock_MHz <= 0)
    throw InputError(profile, "/gpus", "a profile twin calibrate measured (with reference_sm_clock_MHz), got one "
                                       "without a reference clock");
  // The keys timed already: the profile's, then the scenario's own shapes (timed with the model's facts), so that a
  // grid shape the scenario also needs is timed once, as the scenario's.
  std::set<std::string> known;
  for (const auto& [key, m] : kernels.measured) known.insert(key);
  const auto lacking = [&known](const KernelOps& ops) {
    KernelOps out;
    out.facts = ops.facts;
    for (const Op& op : ops.ops)
      if (known.insert(kernel_shape_key(op)).second) out.ops.push_back(op);
    return out;
  };
  if (!scenario.empty()) {
    for (const GemmShape& shape : scenario_gemm_shapes(scenario))
      if (!kernels.measured.count(gemm_key(shape))) increment.gemms.push_back(shape);
    increment.kernels = lacking(scenario_kernel_ops(scenario));
  }
  increment.grid = lacking(default_kernel_ops(/*quick=*/false));  // with the grid's facts (activation, cap)
  increment.reference_sm_clock_MHz = kernels.reference_sm_clock_MHz;
  return increment;
}

Profile profile_with_scenario_shapes(const ProfileIncrement& increment, const CalibrationRun& run,
                                     const std::function<void(const std::string&)>& progress) {
  Profile profile = increment.base;
  GpuKernelProfile& kernels = kernels_of(profile, increment.path, run.preset_name);
  for (const auto& [shape, m] : run.gemms.measured) kernels.measured[gemm_key(shape)] = m;
  std::size_t kernel_shapes = 0, grid_shapes = 0;
  const auto time_into = [&](const KernelOps& ops, std::size_t& count) {
    if (ops.ops.empty()) return;
    const KernelCalibration timed = calibrate_kernels(ops, run.spec, kernels, run.request.quick, progress);
    for (const auto& [key, m] : timed.measured) kernels.measured[key] = m;
    count = timed.measured.size();
  };
  time_into(increment.kernels, kernel_shapes);
  time_into(increment.grid, grid_shapes);
  index_measured_shapes(kernels);
  std::string command;
  for (const std::string& a : own_command_line()) command += (command.empty() ? "" : " ") + a;
  nlohmann::json record = {{"date_utc", utc_now()},
                           {"command", command},
                           {"scenario", run.request.scenario},
                           {"gpu_count", run.identity.world_size},
                           {"gemm_shapes_added", run.gemms.measured.size()},
                           {"kernel_shapes_added", kernel_shapes},
                           {"grid_kernel_shapes_added", grid_shapes},
                           {"reference_sm_clock_MHz", increment.reference_sm_clock_MHz}};
  if (!run.gemms.gpu_agreement.is_null()) record["gemm_gpu_agreement"] = run.gemms.gpu_agreement;
  if (!profile.provenance.contains("increments")) profile.provenance["increments"] = nlohmann::json::array();
  profile.provenance["increments"].push_back(record);
  progress(fmt::format("{}: {} GEMM and {} other kernel shapes of {} and {} of the calibration grid added",
                       increment.path, run.gemms.measured.size(), kernel_shapes,
                       run.request.scenario.empty() ? "no scenario" : run.request.scenario, grid_shapes));
  return profile;
}

}  // namespace twin::gpu
