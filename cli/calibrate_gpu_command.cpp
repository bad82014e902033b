// `twin calibrate` on GPUs: the hand-over to calibrate/gpu (built only with the CUDA toolkit).
#include "cli/calibrate_gpu_command.hpp"

namespace twin {

int run_gpu_calibration(const gpu::CalibrationRequest& request) { return gpu::calibrate_main(request); }

}  // namespace twin
