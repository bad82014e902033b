#include "calibrate/calibration_base.hpp"

namespace twin {

GpuKernelProfile calibration_base(const GpuSpec& gpu, const std::string& preset_name) {
  GpuKernelProfile kernels = builtin_profile().kernels_for(gpu);
  kernels.gpu = preset_name;
  kernels.measured.clear();
  kernels.in_situ_prior = InSituPrior{};
  kernels.corrections.clear();
  index_measured_shapes(kernels);
  return kernels;
}

}  // namespace twin
