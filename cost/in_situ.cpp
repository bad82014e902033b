// The fading weight w_0 acts as one more neighbour at kInSituReachOctaves whose ratio is 1: shrinkage
// toward the benchmark, which is all a profile knows about shapes far from every trace. Chosen on the
// single-H200 accuracy studies of 2026-11-23 (docs/ACCURACY.md): a reach of 1 octave made both the
// held-out half of one study and a second model, predicted from the first, more accurate; 0.5 octave
// learnt too little, 2 octaves carried one model's attention ratio onto another's.
#include "cost/in_situ.hpp"

#include <algorithm>
#include <cmath>

#include "cost/shape_space.hpp"

namespace twin {

std::vector<TraceShape> index_trace_shapes(const std::map<std::string, Measurement>& measured) {
  std::vector<TraceShape> out;
  for (const auto& [key, m] : measured) {
    if (m.source.empty() || !(m.priced_ns > 0) || !(m.median_ns > 0)) continue;
    if (auto op = op_from_kernel_key(key)) out.push_back({*op, std::log(m.median_ns / m.priced_ns)});
  }
  return out;
}

// Interpolating log r_i - log r_0 with the fading weight's ratio at 1 and adding log r_0 back gives the
// prior the fading weight's share: (w_0 log r_0 + sum w_i log r_i) / (w_0 + sum w_i).
double in_situ_ratio(const std::vector<TraceShape>& traced, const Op& op, double prior_ratio) {
  const double prior_log = std::log(prior_ratio);
  std::vector<std::pair<double, std::size_t>> by_distance;  // (squared octaves, index): ties keep key order
  for (std::size_t i = 0; i < traced.size(); ++i)
    if (auto squared = squared_octave_distance(traced[i].op, op)) by_distance.emplace_back(*squared, i);
  const auto ratio = interpolate_log_ratio(std::move(by_distance), kInSituNeighbours,
                                           1.0 / (kInSituReachOctaves * kInSituReachOctaves),
                                           [&](std::size_t i) { return traced[i].log_ratio - prior_log; });
  return std::exp(prior_log + (ratio ? ratio->log_ratio : 0.0));
}

}  // namespace twin
