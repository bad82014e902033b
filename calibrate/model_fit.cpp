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

double busbw_factor(OpKind collective, int ranks) {
  const double n = ranks;
  switch (collective) {
    case OpKind::all_reduce: return 2.0 * (n - 1) / n;
    case OpKind::all_gather:
    case OpKind::reduce_scatter:
    case OpKind::all_to_all: return (n - 1) / n;
    case OpKind::send:
    case OpKind::recv: return 1.0;
    default: throw std::invalid_argument("busbw_factor: not a collective: " + to_string(collective));
  }
}

int algorithm_steps(OpKind collective, int ranks) {
  switch (collective) {
    case OpKind::all_reduce: return 2 * (ranks - 1);
    case OpKind::all_gather:
    case OpKind::reduce_scatter:
    case OpKind::all_to_all: return ranks - 1;
    case OpKind::send:
    case OpKind::recv: return 1;
    default: throw std::invalid_argument("algorithm_steps: not a collective: " + to_string(collective));
  }
}

double percentile(std::vector<double> samples, double fraction) {
  if (samples.empty()) throw std::invalid_argument("percentile: no samples");
  std::sort(samples.begin(), samples.end());
  const double position = std::clamp(fraction, 0.0, 1.0) * static_cast<double>(samples.size() - 1);
  const auto below = static_cast<std::size_t>(std::floor(position));
  const std::size_t above = std::min(below + 1, samples.size() - 1);
  return samples[below] + (position - static_cast<double>(below)) * (samples[above] - samples[below]);
}

Measurement summarize(const std::vector<double>& samples_ns) {
  Measurement m;
  m.median_ns = percentile(samples_ns, 0.5);
  m.p10_ns = percentile(samples_ns, 0.1);
  m.p90_ns = percentile(samples_ns, 0.9);
  m.samples = static_cast<int>(samples_ns.size());
  return m;
}

double interpolate_time_us(const std::vector<CollectivePoint>& points, double size_bytes) {
  if (points.empty()) throw std::invalid_argument("interpolate_time_us: empty table");
  if (points.size() == 1) return points.front().time_us * size_bytes / static_cast<double>(points.front().size_bytes);
  std::size_t upper = 1;
  while (upper + 1 < points.size() && static_cast<double>(points[upper].size_bytes) < size_bytes) ++upper;
  const CollectivePoint& lo = points[upper - 1];
  const CollectivePoint& hi = points[upper];
  const double x0 = std::log(static_cast<double>(lo.size_bytes)), x1 = std::log(static_cast<double>(hi.size_bytes));
  const double y0 = std::log(lo.time_us), y1 = std::log(hi.time_us);
  const double x = std::log(size_bytes);
  return std::exp(y0 + (y1 - y0) * (x - x0) / (x1 - x0));
}

}  // namespace twin
