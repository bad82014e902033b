// The fading weight w_0 acts as one more neighbour at kInSituReachOctaves whose ratio is 1: shrinkage
// toward the benchmark, which is all a profile knows about shapes far from every trace. Chosen on the
// single-H200 accuracy studies of 2026-11-23 (docs/ACCURACY.md): a reach of 1 octave made both the
// held-out half of one study and a second model, predicted from the first, more accurate; 0.5 octave
// learnt too little, 2 octaves carried one model's attention ratio onto another's.
#include "cost/in_situ.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include "cost/shape_space.hpp"

namespace twin {

std::vector<TraceShape> index_trace_shapes(const GpuKernelProfile& kernels) {
  std::vector<TraceShape> out;
  for (const auto& [key, m] : kernels.measured) {
    if (m.source.empty() || !(m.priced_ns > 0) || !(m.median_ns > 0)) continue;
    const std::optional<Op> op = op_from_kernel_key(key);
    if (!op) continue;
    TraceShape shape{*op, std::log(m.median_ns / m.priced_ns)};
    const double exponent = priced_sm_clock_exponent(kernels, *op);
    if (m.run_sm_clock_MHz > 0 && kernels.reference_sm_clock_MHz > 0 && exponent > 0) {
      shape.log_ratio -= exponent * std::log(kernels.reference_sm_clock_MHz / m.run_sm_clock_MHz);
      shape.clock_free = true;
    }
    out.push_back(shape);
  }
  return out;
}

namespace {

// A traced shape's log ratio as a step with `clock_log` (log of its clock's part) takes it.
double log_ratio_at_step(const TraceShape& shape, double clock_log) {
  return shape.log_ratio + (shape.clock_free ? clock_log : 0.0);
}

}  // namespace

// Interpolating log r_i - log r_0 with the fading weight's ratio at 1 and adding log r_0 back gives the
// prior the fading weight's share: (w_0 log r_0 + sum w_i log r_i) / (w_0 + sum w_i).
double in_situ_ratio(const std::vector<TraceShape>& traced, const Op& op, double prior_ratio,
                     double step_clock_ratio) {
  const double prior_log = std::log(prior_ratio), clock_log = std::log(step_clock_ratio);
  std::vector<std::pair<double, std::size_t>> by_distance;  // (squared octaves, index): ties keep key order
  for (std::size_t i = 0; i < traced.size(); ++i)
    if (auto squared = squared_octave_distance(traced[i].op, op)) by_distance.emplace_back(*squared, i);
  const auto ratio = interpolate_log_ratio(std::move(by_distance), kInSituNeighbours,
                                           1.0 / (kInSituReachOctaves * kInSituReachOctaves),
                                           [&](std::size_t i) { return log_ratio_at_step(traced[i], clock_log) - prior_log; });
  return std::exp(prior_log + (ratio ? ratio->log_ratio : 0.0));
}

}  // namespace twin
