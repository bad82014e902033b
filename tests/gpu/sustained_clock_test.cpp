// The sustained-clock load (calibrate/gpu/sustained_clock.hpp) on one GPU, short: the duties it reports are the ones
// asked for, its clocks lie within what the device can run, and they agree with an independent reference, the
// GEMM's own cycle count: a GEMM's time is ~ 1/clock (0.91 power measured on an H200), so TFLOP/s per MHz holds
// within a few percent from one duty to the next if the probe reads the clock the GEMMs ran at.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include "calibrate/gpu/sustained_clock.hpp"

namespace twin::gpu {
namespace {

TEST(SustainedClock, ProbeClockAgreesWithTheGemmsCycles) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) GTEST_SKIP() << "needs a CUDA GPU";
  int max_clock_kHz = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&max_clock_kHz, cudaDevAttrClockRate, 0), cudaSuccess);
  const SustainedClockLoad load{{1.0, 0.4}, 0.3, 1.0, 0.4};
  const std::vector<SustainedClockReading> readings = measure_sustained_clock(load);
  ASSERT_EQ(readings.size(), 2u);
  EXPECT_GT(readings[0].gemm_duty, 0.99);
  EXPECT_NEAR(readings[1].gemm_duty, 0.4, 0.1);
  for (const SustainedClockReading& r : readings) {
    EXPECT_GT(r.sm_clock_MHz, 300);
    EXPECT_LT(r.sm_clock_MHz, 1.05 * max_clock_kHz / 1e3);  // the probe's few-cycle launch overhead at most
  }
  const double full = readings[0].gemm_tflops / readings[0].sm_clock_MHz;
  const double partial = readings[1].gemm_tflops / readings[1].sm_clock_MHz;
  EXPECT_NEAR(partial / full, 1.0, 0.05) << "TFLOP/s per MHz: " << full << " at full duty, " << partial << " at 0.4";
}

}  // namespace
}  // namespace twin::gpu
