#include "calibrate/calibration_base.hpp"

namespace twin {

GpuKernelProfile calibration_base(const GpuSpec& gpu, const std::string& preset_name) {
  GpuKernelProfile kernels = builtin_profile().kernels_for(gpu);
  kernels.gpu = preset_name;
  kernels.measured.clear();
  kernels.in_situ_prior = InSituPrior{};
  kernels.corrections.clear();
  // The clock a step holds is this calibration's to measure (its curves, its power model) or a folded run's to state:
  // the built-in's clock of the prices its in-training factor stands on (cost/builtin_profile.cpp) is no measurement
  // of this GPU, and as sustained_sm_clock_MHz it would win over the curve this calibration measures (from
  // 2026-11-29 to 12-01 every fresh H200 profile priced steps at 1,686 MHz: 13 blind one-H200 studies 7.7% too fast).
  kernels.sustained_sm_clock_MHz = 0;
  kernels.sustained_clock = {};
  kernels.sustained_clock_fp8 = {};
  kernels.power_model = {};
  index_measured_shapes(kernels);
  return kernels;
}

}  // namespace twin
