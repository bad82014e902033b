// The GPU half of `twin calibrate` (cli/calibrate_gpu_command.cpp), compiled only with the CUDA toolkit:
// the options live in cli/calibrate_command.cpp, which every build compiles for --from-trace.
#pragma once
#include "calibrate/gpu/calibration.hpp"

namespace twin {

// Measures this machine's GPUs as `request` says; returns the process exit code.
int run_gpu_calibration(const gpu::CalibrationRequest& request);

}  // namespace twin
