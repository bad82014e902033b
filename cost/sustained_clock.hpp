// The SM clock a GPU sustains at its power limit as a function of its load's GEMM duty: the share of its busy
// time that compute-bound kernels take. Power grows with tensor-core activity, and a GPU at its cap trades clock
// for power: back-to-back GEMMs hold it lowest, a training step, whose memory-bound kernels draw less, somewhat
// higher. `twin calibrate` measures the curve (calibrate/gpu/sustained_clock.hpp); the simulator reads it at each
// GPU's step duty (sim/step_clock.hpp). docs/PROFILES.md "The clock of a training step" has the figures.
#pragma once
#include <vector>

#include <nlohmann/json.hpp>

#include "core/json_reader.hpp"

namespace twin {

struct SustainedClockPoint {
  double gemm_duty = 0;      // share of the busy time in GEMMs under the measured load, (0, 1]
  double sm_clock_MHz = 0;   // the median over the calibration's GPUs of each GPU's settled clock
  std::vector<double> gpu_sm_clock_MHz;  // each GPU's, in rank order (the per-GPU spread)
  double gemm_tflops = 0;    // median over the GPUs of the GEMM's throughput under that load; 0: not recorded
  bool operator==(const SustainedClockPoint&) const = default;
};

// Points in ascending gemm_duty, each duty once; empty: not measured.
struct SustainedClockCurve {
  std::vector<SustainedClockPoint> points;
  bool operator==(const SustainedClockCurve&) const = default;
};

// The clock at `gemm_duty`: linear between the two points around it, the end point's beyond the measured
// range (the limiter's clock flattens where the load is far from the cap, and is not extrapolated); 0 for an
// empty curve.
double sustained_clock_MHz_at(const SustainedClockCurve& curve, double gemm_duty);

nlohmann::json sustained_clock_json(const SustainedClockCurve& curve);
// Throws InputError at the offending path: duties outside (0, 1] or not ascending, clocks outside [1, 1e5] MHz.
SustainedClockCurve read_sustained_clock(const JsonReader& r);

}  // namespace twin
