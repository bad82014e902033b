// Least squares on relative error via the 2x2 normal equations: each row (1, x) / t against 1.
#include "calibrate/model_fit.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace twin {

AffineFit fit_affine_relative(const std::vector<double>& work, const std::vector<double>& time) {
  if (work.size() != time.size() || work.size() < 2)
    throw std::invalid_argument("fit_affine_relative: need at least 2 (work, time) pairs of equal count");
  double s11 = 0, s1x = 0, sxx = 0, s1 = 0, sx = 0;  // normal equations of rows (1/t, x/t) -> 1
  for (std::size_t i = 0; i < work.size(); ++i) {
    if (!(time[i] > 0)) throw std::invalid_argument("fit_affine_relative: times must be positive");
    const double a = 1.0 / time[i], b = work[i] / time[i];
    s11 += a * a; s1x += a * b; sxx += b * b; s1 += a; sx += b;
  }
  const double det = s11 * sxx - s1x * s1x;
  AffineFit fit;
  if (std::abs(det) > 1e-12 * s11 * sxx) {
    fit.intercept = (s1 * sxx - sx * s1x) / det;
    fit.slope = (s11 * sx - s1x * s1) / det;
  }
  if (fit.intercept < 0 || std::abs(det) <= 1e-12 * s11 * sxx) {
    // Pure proportional model: minimise sum((slope x / t) - 1)^2.
    fit.intercept = 0;
    fit.slope = sx / sxx;
  }
  return fit;
}

SaturatingEfficiency gemm_efficiency_from_fit(const AffineFit& seconds_per_flop, double peak_tflops) {
  if (!(seconds_per_flop.slope > 0) || !(peak_tflops > 0))
    throw std::invalid_argument("gemm_efficiency_from_fit: slope and peak must be positive");
  SaturatingEfficiency eff;
  eff.peak = 1.0 / (seconds_per_flop.slope * peak_tflops * 1e12);
  eff.half_work = seconds_per_flop.intercept / seconds_per_flop.slope;
  return eff;
}

LinkProfile link_profile_from_fit(const AffineFit& time_us_per_byte, int steps, double busbw_factor,
                                  double nominal_bandwidth_GBps) {
  if (!(time_us_per_byte.slope > 0) || steps < 1 || !(nominal_bandwidth_GBps > 0))
    throw std::invalid_argument("link_profile_from_fit: slope, steps and nominal bandwidth must be positive");
  LinkProfile link;
  link.latency_us = time_us_per_byte.intercept / steps;
  // factor * S / (B * 1e3 bytes/us * peak) = slope * S
  link.bandwidth.peak = busbw_factor / (time_us_per_byte.slope * nominal_bandwidth_GBps * 1e3);
  link.bandwidth.half_work = 0;
  return link;
}

}  // namespace twin
