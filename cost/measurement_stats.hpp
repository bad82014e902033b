// Reading measurements: order statistics of repeated samples and log-log interpolation in a measured
// table of message sizes. Shared by calibration (which summarises what it timed) and pricing (which reads
// a measured collective table at any size).
#pragma once
#include <vector>

#include "cost/profile.hpp"

namespace twin {

// Order statistics of samples (linear interpolation between order statistics, as numpy's default).
double percentile(std::vector<double> samples, double fraction);
Measurement summarize(const std::vector<double>& samples_ns);

// Log-log interpolation of time over size between the two measured neighbours of `size_bytes`;
// outside the table, the nearest end extrapolated along the last segment. Points must be ascending.
double interpolate_time_us(const std::vector<CollectivePoint>& points, double size_bytes);

}  // namespace twin
