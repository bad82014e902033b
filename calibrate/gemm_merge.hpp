// The GEMM timings of every GPU merged into one calibration: times scaled to one SM clock, each shape its
// median round, the efficiency model fitted, and how far the GPUs that timed the same shapes agree. Pure C++:
// the result depends on the timings and the shapes' order, never on which GPU finished first.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/op.hpp"
#include "cost/profile.hpp"

namespace twin {

// One shape's timings: rounds[gpu] holds the rounds that GPU timed (empty where it timed none).
struct GemmShapeTimings {
  std::vector<std::vector<Measurement>> rounds;
};

struct GemmCalibration {
  std::vector<std::pair<GemmShape, Measurement>> measured;  // in the shapes' order
  std::vector<GemmShape> skipped;    // timed by no GPU: operands larger than the memory allowed
  SaturatingEfficiency efficiency;   // fitted on the measured bf16 shapes (FP8 ones are priced by their own)
  double best_tflops = 0;            // as timed, before scaling to the reference clock
  double reference_sm_clock_MHz = 0; // every measured time is scaled to it (cost/sm_clock.hpp)
  // Shapes timed on several GPUs: each GPU's time against theirs all (provenance.gemm_gpu_agreement; null
  // when fewer than two GPUs timed a shape).
  nlohmann::json gpu_agreement;
};

// `reference_sm_clock_MHz` 0: the median clock of all timings (a full calibration); else that clock (shapes
// added to a profile keep its clock). Every GPU's rounds of a shape count as rounds of it. Throws
// std::runtime_error when fewer than `min_measured` shapes were timed.
GemmCalibration merge_gemm_timings(const std::vector<GemmShape>& shapes, const std::vector<GemmShapeTimings>& timings,
                                   double peak_tflops, double reference_sm_clock_MHz, std::size_t min_measured);

// For the shapes timed on two GPUs or more: per shape, (slowest - fastest) / median of the GPUs' kept times,
// scaled to the reference clock and as timed; per GPU, the median of its times over the shapes' medians.
nlohmann::json gemm_gpu_agreement(const std::vector<GemmShape>& shapes, const std::vector<GemmShapeTimings>& timings,
                                  double reference_sm_clock_MHz);

double gemm_flops(const GemmShape& shape);  // 2 m n k count
// The shape as the profile's key names it (kernel_shape_key of a gemm op).
std::string gemm_key(const GemmShape& shape);

}  // namespace twin
