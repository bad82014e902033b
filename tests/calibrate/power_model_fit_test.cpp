// Fitting the power model (calibrate/power_model_fit.hpp) on readings made by a known GPU: a synthetic one whose
// power is the model's with known parameters, its loads at the cap solved here by their own bisection. The fit must
// give those parameters back, and put every load (each also left out of its own fit) at its clock; readings that
// cannot carry a fit are refused.
#include <cmath>
#include <stdexcept>

#include <gtest/gtest.h>

#include "calibrate/power_model_fit.hpp"

namespace twin {
namespace {

constexpr double kStatic = 110, kPjPerFlop = 0.9, kPjPerByte = 60, kExponent = 2.2, kMax = 1980, kCap = 700;
constexpr double kGemmTflopsPerMHz = 0.4;  // the GEMMs' rate while they run: 792 TFLOP/s at 1,980 MHz
constexpr double kAddBytesPerS = 4e12;

double power(double f, double duty) {
  const double flops = duty * kGemmTflopsPerMHz * 1e12 * f, bytes = (1 - duty) * kAddBytesPerS;
  return kStatic + std::pow(f / kMax, kExponent) * (kPjPerFlop * 1e-12 * flops + kPjPerByte * 1e-12 * bytes);
}

// The load of GEMM duty `duty` (its share of the busy time at the clock it settles at) at the cap.
SustainedClockReading at_cap(double duty) {
  double low = 100, high = kMax;
  while (high - low > 1e-6) ((power((low + high) / 2, duty) > kCap) ? high : low) = (low + high) / 2;
  SustainedClockReading r;
  r.gemm_duty = duty;
  r.sm_clock_MHz = (low + high) / 2;
  r.flops_per_s = duty * kGemmTflopsPerMHz * 1e12 * r.sm_clock_MHz;
  r.bytes_per_s = (1 - duty) * kAddBytesPerS;
  r.power_W = power(r.sm_clock_MHz, duty);
  r.power_cap_W = kCap;
  return r;
}

// The GEMMs beside idle SMs at GEMM duty `duty` (the rest of the time the one-thread probe, whose time also follows
// the clock): at the maximum clock where their power stays under the cap, else where it meets it.
double idle_power(double f, double duty) {
  return kStatic + std::pow(f / kMax, kExponent) * kPjPerFlop * 1e-12 * duty * kGemmTflopsPerMHz * 1e12 * f;
}

SustainedClockReading beside_idle(double duty) {
  double low = 100, high = kMax;
  if (idle_power(kMax, duty) > kCap)
    while (high - low > 1e-6) ((idle_power((low + high) / 2, duty) > kCap) ? high : low) = (low + high) / 2;
  else
    low = kMax;
  SustainedClockReading r;
  r.gemm_duty = 1;
  r.idle_share = 1 - duty;
  r.sm_clock_MHz = (low + high) / 2;
  r.flops_per_s = duty * kGemmTflopsPerMHz * 1e12 * r.sm_clock_MHz;
  r.power_W = idle_power(r.sm_clock_MHz, duty);
  r.power_cap_W = kCap;
  return r;
}

SustainedClockReading memory_only() {
  SustainedClockReading r;
  r.sm_clock_MHz = kMax;
  r.bytes_per_s = kAddBytesPerS;
  r.power_W = power(kMax, 0);
  r.power_cap_W = kCap;
  return r;
}

SustainedClockReading one_thread() {
  SustainedClockReading r;
  r.sm_clock_MHz = kMax;
  r.power_W = kStatic;
  r.power_cap_W = kCap;
  return r;
}

TEST(PowerModelFit, GivesTheGpusParametersBack) {
  const std::vector<SustainedClockReading> curve{at_cap(1.0), at_cap(0.8), at_cap(0.6), at_cap(0.4)};
  ASSERT_LT(curve[0].sm_clock_MHz, curve[3].sm_clock_MHz - 50);  // the loads are on the cap, at different clocks
  const PowerModelFit fit = fit_power_model(curve, memory_only(), one_thread());
  EXPECT_DOUBLE_EQ(fit.model.static_W, kStatic);
  EXPECT_DOUBLE_EQ(fit.model.max_sm_clock_MHz, kMax);
  EXPECT_DOUBLE_EQ(fit.model.power_cap_W, kCap);
  EXPECT_NEAR(fit.model.clock_exponent, kExponent, 0.011);
  EXPECT_NEAR(fit.model.pJ_per_flop, kPjPerFlop, 0.01);
  EXPECT_NEAR(fit.model.pJ_per_byte, kPjPerByte, 0.5);
  ASSERT_EQ(fit.points.size(), 4u);
  for (const PowerFitPoint& p : fit.points) {
    EXPECT_NEAR(p.fitted_MHz, p.measured_MHz, 2) << "duty " << p.gemm_duty;
    EXPECT_NEAR(p.held_out_MHz, p.measured_MHz, 2) << "duty " << p.gemm_duty;
  }
}

TEST(PowerModelFit, PureGemmLoadsAtSeveralClocksPredictTheMixedOnes) {
  // As calibration fits it: the GEMMs back to back (at the cap) and beside idle SMs (one under the cap, at the
  // maximum clock); the GEMMs beside adds held out.
  // Two loads at the cap at different clocks and one under it: any two of them pin the energy and the exponent, so
  // each can be left out.
  const std::vector<SustainedClockReading> pure{at_cap(1.0), beside_idle(0.9), beside_idle(0.5)};
  ASSERT_DOUBLE_EQ(pure[2].sm_clock_MHz, kMax);
  ASSERT_LT(pure[0].sm_clock_MHz, pure[1].sm_clock_MHz - 20);
  ASSERT_LT(pure[1].sm_clock_MHz, kMax - 20);
  const PowerModelFit fit = fit_power_model(pure, memory_only(), one_thread());
  EXPECT_NEAR(fit.model.clock_exponent, kExponent, 0.011);
  EXPECT_NEAR(fit.model.pJ_per_flop, kPjPerFlop, 0.01);
  for (const PowerFitPoint& p : fit.points) {
    EXPECT_NEAR(p.held_out_W, p.power_W, 2) << p.load;
    EXPECT_NEAR(p.held_out_MHz, p.measured_MHz, 2) << p.load;
  }
  for (double duty : {0.8, 0.6, 0.4}) {
    const PowerFitPoint held_out = predict_load(fit.model, at_cap(duty), "mixed");
    EXPECT_NEAR(held_out.fitted_MHz, held_out.measured_MHz, 2) << "duty " << duty;
    EXPECT_NEAR(held_out.fitted_W, held_out.power_W, 1) << "duty " << duty;
  }
}

TEST(PowerModelFit, RefusesReadingsThatCannotCarryAFit) {
  const std::vector<SustainedClockReading> curve{at_cap(1.0), at_cap(0.4)};
  EXPECT_THROW(fit_power_model({at_cap(1.0)}, memory_only(), one_thread()), std::invalid_argument);
  SustainedClockReading no_nvml = one_thread();
  no_nvml.power_W = 0;
  EXPECT_THROW(fit_power_model(curve, memory_only(), no_nvml), std::invalid_argument);
  SustainedClockReading cold_memory = memory_only();
  cold_memory.power_W = kStatic;
  EXPECT_THROW(fit_power_model(curve, cold_memory, one_thread()), std::invalid_argument);
}

TEST(PowerModelFit, MedianReadingOverTheGpus) {
  SustainedClockReading a = one_thread(), b = one_thread(), c = one_thread();
  a.power_W = 100, b.power_W = 130, c.power_W = 120;
  EXPECT_DOUBLE_EQ(median_reading({{a}, {b}, {c}}, 0).power_W, 120);
}

}  // namespace
}  // namespace twin
