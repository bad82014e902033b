// Fitting the power model (cost/power_model.hpp) on calibration's loads only (calibrate/gpu/sustained_clock.hpp):
// the one-thread load gives static_W and max_sm_clock_MHz (the clock the busy GPU holds under its cap), the
// memory-only load pJ_per_byte, and the curve's loads at the cap (8192^3 GEMMs beside 512 MiB adds at GEMM duties
// 1.0-0.4, each at the clock where the limiter held its power) pJ_per_flop and clock_exponent: for each exponent on a
// grid the energy per FLOP by least squares on the points' measured power, and the exponent whose model puts the
// points' clocks nearest their measured ones. Each curve point is also predicted by a fit without it (leave one out):
// the calibration's own held-out error, logged and recorded in docs/ACCURACY.md beside the held-out training steps.
#pragma once
#include <string>
#include <vector>

#include "calibrate/sustained_clock_curve.hpp"
#include "cost/power_model.hpp"

namespace twin {

struct PowerFitPoint {
  double gemm_duty = 0, power_W = 0, measured_MHz = 0;
  double fitted_MHz = 0;    // the clock the fitted model puts the load at (its power meeting the cap)
  double held_out_MHz = 0;  // the same by the model fitted without this point
};

struct PowerModelFit {
  PowerModel model;
  std::vector<PowerFitPoint> points;  // the curve's, in the order given
};

// One second of a load's busy time at the clock it ran at, as the step work the model prices.
StepWork work_of(const SustainedClockReading& reading);

// Throws std::invalid_argument where the readings cannot carry the fit: no power read (no NVML), fewer than two
// curve points, a curve point without GEMM work, a memory-only load drawing no more than the one-thread load.
PowerModelFit fit_power_model(const std::vector<SustainedClockReading>& curve, const SustainedClockReading& memory,
                              const SustainedClockReading& light);

// The median of each field over the GPUs of `per_gpu[g][index]`.
SustainedClockReading median_reading(const std::vector<std::vector<SustainedClockReading>>& per_gpu, std::size_t index);

// "static 112 W at 1,980 MHz, 1.01 pJ/FLOP, 61.5 pJ/byte, exponent 2.10, cap 700 W" and one line per curve point.
std::vector<std::string> describe_power_fit(const PowerModelFit& fit);

}  // namespace twin
