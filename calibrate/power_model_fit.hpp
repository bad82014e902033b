// Fitting the power model (cost/power_model.hpp) on calibration's loads only (calibrate/gpu/sustained_clock.hpp):
// the one-thread load gives static_W and max_sm_clock_MHz (the clock the busy GPU holds under its cap), the
// memory-only load pJ_per_byte, and the pure GEMM loads (8192^3 GEMMs back to back, at the cap, and beside the
// one-thread probe at lower GEMM duties: the same GEMMs at clocks up to the maximum) pJ_per_flop and
// clock_exponent: for each exponent on a grid the energy per FLOP by least squares on the loads' measured power, and
// the exponent whose model leaves the least squared power error. Why pure GEMM loads at several clocks and not the
// curve's GEMMs beside adds, all at the cap (the fit until 2026-11-29): the energy per FLOP at the maximum clock was
// then extrapolated through an exponent that four points at the cap pinned poorly (2.20 and 1.22 on two leases), and
// it put MoE steps, which run near the maximum clock, 25-33% over their measured power (docs/ACCURACY.md). Each fit
// load is also predicted by a fit without it (leave one out); the curve's mixed loads, the grouped expert GEMMs and
// the attention load are predicted and never fitted (predict_load): the held-out error docs/ACCURACY.md records.
#pragma once
#include <string>
#include <vector>

#include "calibrate/sustained_clock_curve.hpp"
#include "cost/power_model.hpp"

namespace twin {

struct PowerFitPoint {
  std::string load;  // what the load ran, for the log
  double gemm_duty = 0, power_W = 0, measured_MHz = 0;
  double fitted_MHz = 0;    // the clock the fitted model puts the load at (its power meeting the cap)
  double held_out_MHz = 0;  // the same by the model fitted without this load (a held-out load: fitted_MHz)
  double fitted_W = 0;      // the fitted model's power at the load's measured clock and work
  double held_out_W = 0;    // the same by the model fitted without this load (a held-out load: fitted_W)
};

struct PowerModelFit {
  PowerModel model;
  std::vector<PowerFitPoint> points;  // the fit's GEMM loads, in the order given, then the held-out loads
};

// A load the model was not fitted on, predicted by it (`label`: what the load ran).
PowerFitPoint predict_load(const PowerModel& model, const SustainedClockReading& reading, const std::string& label);

// One second of a load's busy time at the clock it ran at, as the step work the model prices.
StepWork work_of(const SustainedClockReading& reading);

// `gemm_loads`: loads of GEMMs (with or without other work) at two clocks at least. Throws std::invalid_argument
// where the readings cannot carry the fit: no power read (no NVML), fewer than two GEMM loads, a GEMM load without
// GEMM work, a memory-only load drawing no more than the one-thread load.
PowerModelFit fit_power_model(const std::vector<SustainedClockReading>& gemm_loads, const SustainedClockReading& memory,
                              const SustainedClockReading& light);

// The median of each field over the GPUs of `per_gpu[g][index]`.
SustainedClockReading median_reading(const std::vector<std::vector<SustainedClockReading>>& per_gpu, std::size_t index);

// "static 112 W at 1,980 MHz, 1.01 pJ/FLOP, 61.5 pJ/byte, exponent 2.10, cap 700 W" and one line per load.
std::vector<std::string> describe_power_fit(const PowerModelFit& fit);

}  // namespace twin
