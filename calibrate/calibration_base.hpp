// What `twin calibrate` starts from before it measures: the built-in profile's entry for the GPU, with
// everything a measurement will replace emptied and nothing the built-in profile fitted for other
// purposes kept. In particular no in-training prior: the built-in one is fitted on published runs of
// clusters (docs/VALIDATION.md) and is not this GPU's; a calibrated profile learns its own from traces
// (`twin calibrate --from-trace`, docs/PROFILES.md).
#pragma once
#include <string>

#include "core/cluster.hpp"
#include "cost/profile.hpp"

namespace twin {

GpuKernelProfile calibration_base(const GpuSpec& gpu, const std::string& preset_name);

}  // namespace twin
