// Refitting the profile's saturating-efficiency models of non-GEMM kernels (memory-bound ops by bytes,
// flash attention by FLOPs) from measured kernel times. Pure C++: used by `twin calibrate`, tested on CPU.
#pragma once
#include <vector>

#include "cost/profile.hpp"

namespace twin {

// Under eff(w) = peak w / (w + half), a kernel of work w at nominal rate R takes (w + half) / (R peak):
// affine in w. Fits that line to (work, seconds) by least squares on relative error, then
// peak = 1 / (slope R), half_work = intercept / slope. `rate_per_second`: bytes/s of HBM for
// memory-bound kernels, FLOP/s of the bf16 peak for attention.
// Throws std::invalid_argument for fewer than 2 points, non-positive times or a non-positive rate.
SaturatingEfficiency fit_saturating_efficiency(const std::vector<double>& work, const std::vector<double>& seconds,
                                               double rate_per_second);

}  // namespace twin
