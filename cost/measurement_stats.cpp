#include "cost/measurement_stats.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace twin {

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
