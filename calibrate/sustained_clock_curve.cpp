#include "calibrate/sustained_clock_curve.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "cost/measurement_stats.hpp"

namespace twin {

SustainedClockCurve sustained_clock_curve(const std::vector<std::vector<SustainedClockReading>>& per_gpu) {
  if (per_gpu.empty()) throw std::invalid_argument("sustained_clock_curve: no GPU's readings");
  const std::size_t points = per_gpu.front().size();
  std::vector<SustainedClockPoint> unordered;
  for (std::size_t p = 0; p < points; ++p) {
    std::vector<double> duties, clocks, tflops, gemm_clocks, nvml_clocks;
    SustainedClockPoint point;
    for (const std::vector<SustainedClockReading>& gpu : per_gpu) {
      if (gpu.size() != points) throw std::invalid_argument("sustained_clock_curve: GPUs read different duties");
      duties.push_back(gpu[p].gemm_duty);
      clocks.push_back(gpu[p].sm_clock_MHz);
      tflops.push_back(gpu[p].gemm_tflops);
      gemm_clocks.push_back(gpu[p].gemm_clock_MHz);
      nvml_clocks.push_back(gpu[p].nvml_sm_clock_MHz);
      point.gpu_sm_clock_MHz.push_back(gpu[p].sm_clock_MHz);
    }
    point.gemm_duty = percentile(duties, 0.5);
    point.sm_clock_MHz = percentile(clocks, 0.5);
    point.gemm_tflops = percentile(tflops, 0.5);
    point.gemm_clock_MHz = percentile(gemm_clocks, 0.5);
    point.nvml_sm_clock_MHz = percentile(nvml_clocks, 0.5);  // 0 where NVML could not be opened
    unordered.push_back(std::move(point));
  }
  std::stable_sort(unordered.begin(), unordered.end(),
                   [](const SustainedClockPoint& a, const SustainedClockPoint& b) { return a.gemm_duty < b.gemm_duty; });
  SustainedClockCurve curve;
  for (SustainedClockPoint& point : unordered)
    if (curve.points.empty() || point.gemm_duty > curve.points.back().gemm_duty) curve.points.push_back(std::move(point));
  return curve;
}

std::vector<std::string> describe_sustained_clock(const SustainedClockCurve& curve) {
  std::vector<std::string> lines;
  for (const SustainedClockPoint& point : curve.points) {
    std::vector<double> clocks = point.gpu_sm_clock_MHz;
    if (clocks.empty()) clocks.push_back(point.sm_clock_MHz);
    const auto [low, high] = std::minmax_element(clocks.begin(), clocks.end());
    const std::string nvml =
        point.nvml_sm_clock_MHz > 0 ? fmt::format(", {:.0f} MHz by NVML", point.nvml_sm_clock_MHz) : std::string();
    lines.push_back(fmt::format("GEMM duty {:.2f}: {:.0f} MHz ({:.0f}-{:.0f} over {} GPUs), GEMM {:.0f} TFLOP/s, {:.0f} "
                                "MHz by the GEMMs' cycles{}", point.gemm_duty, point.sm_clock_MHz, *low, *high,
                                point.gpu_sm_clock_MHz.size(), point.gemm_tflops, point.gemm_clock_MHz, nvml));
  }
  return lines;
}

}  // namespace twin
