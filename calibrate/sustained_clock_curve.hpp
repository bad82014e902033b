// From each GPU's readings under the sustained-clock load (calibrate/gpu/sustained_clock.hpp) to the profile's
// curve (cost/sustained_clock.hpp): one point per duty asked for, at the median over the GPUs.
#pragma once
#include <string>
#include <vector>

#include "cost/sustained_clock.hpp"

namespace twin {

struct SustainedClockReading {
  double gemm_duty = 0;                  // measured: GEMM time / (GEMM + memory-bound time) in the counted part
  double sm_clock_MHz = 0;               // median of the probes after the GEMMs
  double sm_clock_after_memory_MHz = 0;  // median of the probes after the memory-bound kernels (0 at full duty)
  double gemm_tflops = 0;                // the median GEMM's throughput
  double gemm_clock_MHz = 0;             // gemm_tflops over the GEMM's TFLOP/s per MHz in a short burst (0: none)
  // The median of the SM clock NVML reported at evenly spaced points of the counted part
  // (calibrate/gpu/stream_marks.hpp; 0: no NVML): the driver's reading beside the probe's, recorded, pricing nothing.
  double nvml_sm_clock_MHz = 0;
  // The power model's inputs (cost/power_model.hpp), over the same counted part: the mean power by NVML's energy
  // counter read where the stream reaches the part's start and end (0: no NVML on this machine), the work per second
  // of busy time (GEMM FLOPs, the adds' HBM bytes), and the enforced power limit.
  double power_W = 0;
  double flops_per_s = 0;
  double bytes_per_s = 0;
  double power_cap_W = 0;
  // The share of the counted part the one-thread probe filled between the GEMMs (the power model's GEMM loads under
  // the cap: the SMs idle), 0 in the curve's loads.
  double idle_share = 0;
};

// `per_gpu[g][p]`: GPU g's reading of duty p (every GPU the same duties, in the same order). Each point's duty,
// clock, throughput and GEMM clock are the medians over the GPUs, its gpu_sm_clock_MHz each GPU's clock; points in ascending
// duty, a point whose median duty is not above the previous one's dropped (duties asked for apart by 0.2 never
// are). Throws std::invalid_argument when the GPUs' reading counts differ or none is given.
SustainedClockCurve sustained_clock_curve(const std::vector<std::vector<SustainedClockReading>>& per_gpu);

// "duty 0.79: 1,512 MHz (1,498-1,530 over 4 GPUs), 702 TFLOP/s, 1,509 MHz by the GEMMs' cycles", one line per point.
std::vector<std::string> describe_sustained_clock(const SustainedClockCurve& curve);

}  // namespace twin
