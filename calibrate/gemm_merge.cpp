// Why every GPU's rounds pool into one median: GPUs that are nominally equal are the population a profile
// describes, and the agreement figures say how far apart they were.
#include "calibrate/gemm_merge.hpp"

#include <algorithm>
#include <stdexcept>

#include "calibrate/model_fit.hpp"
#include "cost/sm_clock.hpp"

namespace twin {
namespace {

double median_of(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0.0 : values[(values.size() - 1) / 2];
}

}  // namespace

double gemm_flops(const GemmShape& s) { return 2.0 * static_cast<double>(s.m) * s.n * s.k * s.count; }

std::string gemm_key(const GemmShape& shape) {
  Op op;
  op.kind = OpKind::gemm;
  op.gemm = shape;
  return kernel_shape_key(op);
}

GemmCalibration merge_gemm_timings(const std::vector<GemmShape>& shapes, const std::vector<GemmShapeTimings>& timings,
                                   double peak_tflops, double reference_sm_clock_MHz, std::size_t min_measured) {
  GemmCalibration result;
  std::vector<Measurement> all;
  for (const GemmShapeTimings& shape : timings)
    for (const auto& gpu_rounds : shape.rounds) all.insert(all.end(), gpu_rounds.begin(), gpu_rounds.end());
  result.reference_sm_clock_MHz = reference_sm_clock_MHz > 0 ? reference_sm_clock_MHz : median_sm_clock_MHz(all);
  std::vector<double> flops, seconds;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    std::vector<Measurement> pooled;
    for (const auto& gpu_rounds : timings[i].rounds) pooled.insert(pooled.end(), gpu_rounds.begin(), gpu_rounds.end());
    if (pooled.empty()) {
      result.skipped.push_back(shapes[i]);
      continue;
    }
    const Measurement kept = median_round_at_sm_clock(pooled, result.reference_sm_clock_MHz);
    result.measured.emplace_back(shapes[i], kept);
    if (is_fp8(shapes[i])) continue;  // FP8 GEMMs are priced from their own timings (cost/kernel_cost.cpp)
    for (const Measurement& m : pooled)
      result.best_tflops = std::max(result.best_tflops, gemm_flops(shapes[i]) / m.median_ns * 1e-3);
    flops.push_back(gemm_flops(shapes[i]));
    seconds.push_back(kept.median_ns * 1e-9);
  }
  if (result.measured.size() < min_measured)
    throw std::runtime_error("only " + std::to_string(result.measured.size()) + " GEMM shape(s) could be measured");
  if (flops.size() >= 2)
    result.efficiency = gemm_efficiency_from_fit(fit_affine_relative(flops, seconds), peak_tflops);
  result.gpu_agreement = gemm_gpu_agreement(shapes, timings, result.reference_sm_clock_MHz);
  return result;
}

nlohmann::json gemm_gpu_agreement(const std::vector<GemmShape>& shapes, const std::vector<GemmShapeTimings>& timings,
                                  double reference_sm_clock_MHz) {
  std::size_t gpus = 0;
  for (const GemmShapeTimings& t : timings) gpus = std::max(gpus, t.rounds.size());
  nlohmann::json shape_rows = nlohmann::json::array();
  std::vector<std::vector<double>> ratios(gpus);  // per GPU: its time over the shape's median
  double worst_scaled = 0, worst_timed = 0;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    std::vector<double> scaled(gpus, 0), timed(gpus, 0);
    std::size_t timed_on = 0;
    for (std::size_t g = 0; g < timings[i].rounds.size(); ++g) {
      if (timings[i].rounds[g].empty()) continue;
      const Measurement kept = median_round_at_sm_clock(timings[i].rounds[g], reference_sm_clock_MHz);
      scaled[g] = kept.median_ns;
      std::vector<double> as_timed;
      for (const Measurement& m : timings[i].rounds[g]) as_timed.push_back(m.median_ns);
      timed[g] = median_of(as_timed);
      ++timed_on;
    }
    if (timed_on < 2) continue;
    std::vector<double> present_scaled, present_timed;
    for (std::size_t g = 0; g < gpus; ++g)
      if (scaled[g] > 0) present_scaled.push_back(scaled[g]), present_timed.push_back(timed[g]);
    const auto spread = [](const std::vector<double>& v) {
      const auto [low, high] = std::minmax_element(v.begin(), v.end());
      return (*high - *low) / median_of(v);
    };
    const double median_scaled = median_of(present_scaled);
    nlohmann::json per_gpu = nlohmann::json::array();
    for (std::size_t g = 0; g < gpus; ++g) {
      per_gpu.push_back(scaled[g] > 0 ? nlohmann::json(scaled[g] * 1e-3) : nlohmann::json());
      if (scaled[g] > 0) ratios[g].push_back(scaled[g] / median_scaled);
    }
    worst_scaled = std::max(worst_scaled, spread(present_scaled));
    worst_timed = std::max(worst_timed, spread(present_timed));
    shape_rows.push_back({{"shape", gemm_key(shapes[i])}, {"us_at_reference_clock_by_gpu", per_gpu},
                          {"spread_at_reference_clock", spread(present_scaled)}, {"spread_as_timed", spread(present_timed)}});
  }
  if (shape_rows.empty()) return nullptr;
  nlohmann::json gpu_ratios = nlohmann::json::array();
  for (const auto& r : ratios) gpu_ratios.push_back(median_of(r));
  return {{"shapes", shape_rows}, {"gpu_time_over_median", gpu_ratios},
          {"max_spread_at_reference_clock", worst_scaled}, {"max_spread_as_timed", worst_timed}};
}

}  // namespace twin
