// The fitting code lives in calibrate/model_fit.hpp (pure C++, shared with the simulator); this header
// keeps its names visible in twin::gpu for the calibration sources.
#pragma once
#include "calibrate/model_fit.hpp"

namespace twin::gpu {

using twin::AffineFit;
using twin::algorithm_steps;
using twin::busbw_factor;
using twin::fit_affine_relative;
using twin::gemm_efficiency_from_fit;
using twin::interpolate_time_us;
using twin::link_profile_from_fit;
using twin::percentile;
using twin::summarize;

}  // namespace twin::gpu
