// The saturating model is an affine time law; the fit itself is model_fit.hpp's relative least squares.
#include "calibrate/kernel_fit.hpp"

#include <stdexcept>

#include "calibrate/model_fit.hpp"

namespace twin {

SaturatingEfficiency fit_saturating_efficiency(const std::vector<double>& work, const std::vector<double>& seconds,
                                               double rate_per_second) {
  if (!(rate_per_second > 0)) throw std::invalid_argument("fit_saturating_efficiency: rate must be positive");
  const AffineFit fit = fit_affine_relative(work, seconds);
  if (!(fit.slope > 0)) throw std::invalid_argument("fit_saturating_efficiency: times do not grow with work");
  SaturatingEfficiency eff;
  eff.peak = 1.0 / (fit.slope * rate_per_second);
  eff.half_work = fit.intercept / fit.slope;
  return eff;
}

}  // namespace twin
