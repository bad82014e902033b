// The NVML reader (gpu/nvml_power.hpp) and the power the calibration's loads read through it
// (calibrate/gpu/sustained_clock.hpp): readings within what the device reports it can do, the mean power by the
// energy counter against an independent reference (the mean of NVML's power samples over the same idle second), and
// a busy GEMM load drawing more than the same GPU idle, the memory-only load more than the one-thread one.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include <cuda_runtime.h>

#include "calibrate/gpu/sustained_clock.hpp"
#include "gpu/nvml_power.hpp"

namespace twin::gpu {
namespace {

bool has_gpu() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

// The mean power over `seconds` of idle by the energy counter, and the mean of power samples every 20 ms.
struct IdlePower {
  double by_energy_W = 0, by_samples_W = 0;
};
IdlePower idle_power(const NvmlPower& nvml, double seconds) {
  const auto start = std::chrono::steady_clock::now();
  const double start_J = nvml.energy_J();
  double sum_W = 0;
  int samples = 0;
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < seconds) {
    sum_W += nvml.power_W(), ++samples;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return {(nvml.energy_J() - start_J) / elapsed_s, sum_W / samples};
}

TEST(NvmlPower, ReadingsWithinTheDevicesLimits) {
  if (!has_gpu()) GTEST_SKIP() << "needs a CUDA GPU";
  const NvmlPower nvml(0);
  const double limit_W = nvml.power_limit_W();
  EXPECT_GT(limit_W, 50);
  EXPECT_LT(limit_W, 2000);
  EXPECT_GT(nvml.power_W(), 0);
  EXPECT_LE(nvml.power_W(), 1.2 * limit_W);
  int max_clock_kHz = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&max_clock_kHz, cudaDevAttrClockRate, 0), cudaSuccess);
  EXPECT_NEAR(nvml.max_sm_clock_MHz(), max_clock_kHz / 1e3, 0.05 * max_clock_kHz / 1e3);
  EXPECT_GT(nvml.sm_clock_MHz(), 0);
  EXPECT_LE(nvml.sm_clock_MHz(), nvml.max_sm_clock_MHz());
  // Idle, both readings lie between nothing and half the cap. They are not held to each other: the power samples are
  // the driver's average over its last second or so, which lags a load that just ended (on an H200 after a training
  // run: 187 W sampled where the energy counter gave 133 W over the same second, 2026-11-29 18:22 UTC).
  const IdlePower idle = idle_power(nvml, 1.0);
  EXPECT_GT(idle.by_energy_W, 0);
  EXPECT_LT(idle.by_energy_W, 0.5 * limit_W) << "energy counter " << idle.by_energy_W << " W";
  EXPECT_GT(idle.by_samples_W, 0);
  EXPECT_LT(idle.by_samples_W, 0.5 * limit_W) << "power samples " << idle.by_samples_W << " W";
}

TEST(NvmlPower, LoadsDrawMoreThanIdle) {
  if (!has_gpu()) GTEST_SKIP() << "needs a CUDA GPU";
  const NvmlPower nvml(0);
  const double idle_W = idle_power(nvml, 1.0).by_energy_W;
  SustainedClockLoad load{{1.0}, 0.3, 1.2, 0.4};
  load.power_load_s = 0.8, load.power_load_settle_s = 0.2;
  load.idle_gemm_duties = {0.5};
  const std::vector<SustainedClockReading> readings = measure_sustained_clock(load);
  ASSERT_EQ(readings.size(), 1 + power_load_names(load).size());
  ASSERT_EQ(readings.size(), 6u);
  const SustainedClockReading &gemms = readings[0], &memory = readings[1], &light = readings[2];
  const SustainedClockReading &half = readings[3], &experts = readings[4], &attention = readings[5];
  EXPECT_GT(gemms.power_W, idle_W + 100) << "idle " << idle_W << " W";
  EXPECT_LE(gemms.power_W, 1.2 * gemms.power_cap_W);
  EXPECT_GT(memory.power_W, light.power_W + 20)
      << "memory-only " << memory.power_W << " W, one-thread " << light.power_W;
  EXPECT_GT(light.power_W, 0);
  EXPECT_GT(gemms.flops_per_s, 1e14);  // an 8192^3 BF16 GEMM on a data-centre GPU: hundreds of TFLOP/s
  EXPECT_GT(memory.bytes_per_s, 5e11);  // and its adds hundreds of GB/s at least
  EXPECT_EQ(light.flops_per_s, 0);
  EXPECT_LE(light.sm_clock_MHz, 1.05 * nvml.max_sm_clock_MHz());
  // The GEMMs beside idle SMs: about half the time idle, drawing more than the one-thread load and no more than
  // the GEMMs back to back.
  EXPECT_NEAR(half.idle_share, 0.5, 0.15);
  EXPECT_GT(half.power_W, light.power_W + 50);
  EXPECT_LT(half.power_W, gemms.power_W + 10);
  EXPECT_GT(half.flops_per_s, 0.3 * gemms.flops_per_s);
  // The held-out loads: tensor-core work at hundreds of TFLOP/s, drawing well over the one-thread load.
  for (const SustainedClockReading* held_out : {&experts, &attention}) {
    EXPECT_GT(held_out->flops_per_s, 1e14);
    EXPECT_GT(held_out->power_W, light.power_W + 100);
    EXPECT_EQ(held_out->idle_share, 0);
  }
}

}  // namespace
}  // namespace twin::gpu
