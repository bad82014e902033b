// The profile `twin calibrate` writes: the built-in profile's structure with the measured kernels, GEMM fit,
// collective tables and interference in place, and a provenance that says what was measured, how, where and when.
#pragma once
#include <string>

#include <cuda_runtime.h>
#include <nlohmann/json.hpp>

#include "calibrate/gemm_merge.hpp"
#include "calibrate/gpu/calibration.hpp"
#include "calibrate/gpu/calibration_machine.hpp"
#include "core/launch_environment.hpp"
#include "cost/profile.hpp"

namespace twin::gpu {

struct CalibrationRun {
  const CalibrationRequest& request;
  const RankIdentity& identity;
  const cudaDeviceProp& props;
  std::string preset_name;
  GpuSpec spec;
  const MachineFacts& facts;
  const GemmCalibration& gemms;
  double seconds = 0;
};

// `kernels`: the GPU's kernel profile with every measurement in place; `kernel_summary` what
// calibrate_kernels_into returned.
Profile calibrated_profile(const CalibrationRun& run, const GpuKernelProfile& kernels, const nlohmann::json& kernel_summary);

}  // namespace twin::gpu
